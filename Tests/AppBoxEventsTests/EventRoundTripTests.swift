import AppBoxEvents
import SandboxPolicy
import Testing

/// Every event type, written and read back through the one schema: what the daemon writes,
/// every reader reads, exactly.
@Suite("Event round trips")
struct EventRoundTripTests {
  /// One or more events of every type, with the values that stress the format: extreme
  /// integers, times at the range's ends, paths that are not UTF-8, every enum value.
  static let samples: [AppBoxEvent] = {
    var events: [AppBoxEvent] = [
      .log(LogHeader(mount: "20260115-103012-3fa9", time: 1_768_473_012.5)),
      .log(LogHeader(mount: "m", time: 0, segment: Int.max, eventsBefore: Int.max)),
      .rotate(LogRotation(mount: "20260115-103012-3fa9", time: 1_768_473_099, nextSegment: 1)),
      .usage(
        UsageEvent(
          time: 1_700_000_000.125,
          sample: UsageSample(
            used: .max, capacity: .max, caches: .min, tmp: 0, purges: .max, bytesPurged: .max, noSpace: .min),
          state: .bfu, reason: .mount)),
      .capacity(CapacityEvent(time: -EventSeconds.limit, from: .min, to: .max, reason: .resize)),
      .capacity(
        CapacityEvent(time: EventSeconds.limit, from: 1 << 20, to: 9_223_372_036_854_775_807, reason: .schedule)),
      .purge(
        PurgeEvent(
          time: .leastNonzeroMagnitude, pathBytes: [0xFF, 0xFE, 0x00, 0x22, 0x5C], bytes: .max, domain: .caches,
          reason: .shrink,
          lastUse: 4_294_967_295)),
      .purgeCost(
        PurgeCostEvent(
          kind: .recreated, time: 1, path: Array("Library/Caches/é".utf8), purgedBytes: 0, secondsSincePurge: 0)),
      .purgeCost(PurgeCostEvent(kind: .missed, time: 2, path: [0x80], purgedBytes: -1, secondsSincePurge: 1e-9)),
      .refusal(
        ProtectionEvent(
          time: 3, pathBytes: Array("Documents/\u{2028}\"\\".utf8), protectionClass: .complete,
          operation: .createNew, state: .grace)),
      .refusal(
        ProtectionEvent(
          time: 3, pathBytes: [0xC0, 0xAF], protectionClass: .completeWhenUserInactive, operation: .handleIO,
          state: .locked, count: Int.max, last: 4)),
    ]
    events += [
      .unreadableClass(
        UnreadableClassEvent(
          time: 11, pathBytes: Array("Documents/a".utf8), attribute: "user.appbox.protection",
          value: Array("Complete".utf8), error: nil)),
      .unreadableClass(
        UnreadableClassEvent(
          time: 12, pathBytes: [0xFF], attribute: "user.appbox.inherited-protection", value: [0x00, 0x01, 0xC3],
          error: nil)),
      .unreadableClass(
        UnreadableClassEvent(
          time: 13, pathBytes: Array("Documents/b".utf8), attribute: "user.appbox.protection", value: nil,
          error: "EIO")),
    ]
    // A device's: the container of a purge (and whose write it paid for), of a refusal, and
    // each container's usage.
    var devicePurge = PurgeEvent(
      time: 14, pathBytes: Array("Containers/Data/Application/com.example.a/tmp/x".utf8), bytes: 4096,
      domain: .tmp, reason: .pressure, lastUse: 13)
    devicePurge.container = "com.example.a"
    devicePurge.requester = "group.com.example.shared"
    var deviceRefusal = ProtectionEvent(
      time: 15, pathBytes: Array("Containers/Shared/AppGroup/group.x/a".utf8), protectionClass: .complete,
      operation: .openExisting, state: .locked, count: 3, last: 16)
    deviceRefusal.container = "group.x"
    events += [.purge(devicePurge), .refusal(deviceRefusal)]
    for reason in UsageEvent.Reason.allCases {
      for kind in ContainerKind.allCases {
        events.append(
          .containerUsage(
            ContainerUsageEvent(
              time: 17, container: "com.example.\(kind)", kind: kind, used: .max, caches: 0, tmp: .min,
              reason: reason)))
      }
    }
    for reason in UsageEvent.Reason.allCases {
      events.append(
        .usage(
          UsageEvent(
            time: 7,
            sample: UsageSample(used: 1, capacity: 2, caches: 3, tmp: 4, purges: 5, bytesPurged: 6, noSpace: 7),
            state: .unlocked, reason: reason)))
    }
    for reason in PurgeReason.allCases {
      for domain in StorageDomain.allCases {
        events.append(
          .purge(
            PurgeEvent(time: 8, pathBytes: Array("tmp/x".utf8), bytes: 4096, domain: domain, reason: reason, lastUse: 7)
          ))
      }
    }
    for protectionClass in ProtectionClass.allCases {
      for operation in ProtectedOperation.allCases {
        for state in DeviceState.allCases {
          events.append(
            .refusal(
              ProtectionEvent(
                time: 9, pathBytes: Array("Documents/a".utf8), protectionClass: protectionClass, operation: operation,
                state: state)))
        }
      }
    }
    for from in DeviceState.allCases {
      for to in DeviceState.allCases { events.append(.state(DeviceStateEvent(time: 10, from: from, to: to))) }
    }
    // A device's app confinement: every reason, with and without the app and container.
    for reason in ConfinementEvent.Reason.allCases {
      events.append(
        .confinement(
          ConfinementEvent(
            time: 18, pathBytes: Array("Containers/Data/Application/com.example.b/Documents".utf8), reason: reason,
            app: "com.example.a", container: "com.example.b", operation: "lookup")))
    }
    events.append(
      .confinement(
        ConfinementEvent(
          time: 19, pathBytes: [0xFF, 0x22], reason: .noProcess, app: nil, container: nil, operation: "open")))
    return events
  }()

  @Test("the samples cover every type the schema names")
  func coverage() {
    #expect(Set(Self.samples.map(\.typeName)) == Set(AppBoxEvent.typeNames))
  }

  @Test("each event reads back equal, from one line that starts with its type", arguments: samples)
  func roundTrip(_ event: AppBoxEvent) throws {
    let line = try event.encoded()
    #expect(!line.contains(0x0A) && !line.contains(0x0D))
    #expect(AppBoxEvent.leadingType(line).map(String.init) == event.typeName)
    #expect(try AppBoxEvent.decode(line) == event)
    // And through a reader, as the report reads it.
    var reader = EventLogReader()
    reader.read(line + [0x0A])
    #expect(reader.malformedLines == 0 && reader.skippedLines == 0)
    if case .log(let header) = event {
      #expect(reader.headers == [header])
    } else {
      #expect(reader.events == (event.isLogStructure ? [] : [event]))
    }
  }

  @Test("seconds beyond the range are clamped when written, so they read back")
  func clampedSeconds() throws {
    for (written, read) in [
      (1e300, EventSeconds.limit), (-1e308, -EventSeconds.limit), (.nan, 0), (.infinity, EventSeconds.limit),
    ] {
      let line = try AppBoxEvent.state(DeviceStateEvent(time: written, from: .locked, to: .unlocked)).encoded()
      #expect(try AppBoxEvent.decode(line).time == read)
    }
  }
}

extension AppBoxEvent: CustomTestStringConvertible {
  public var testDescription: String { typeName }
}
