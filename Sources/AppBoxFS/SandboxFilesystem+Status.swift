import FilesystemInterface
import Posix
import SandboxPolicy

// MARK: - Status for `appbox status`

extension SandboxFilesystem {
  /// Everything `appbox status` shows, as one JSON object.
  public func statusJSON() -> String {
    let snapshot = protection.shown
    let refusals = protection.counters.withLock { $0.jsonObject }
    let busyPoll = driver.busyPoll
    let transport = Self.transportJSON(driver.transport)
    let requests =
      "{" + driver.requestCounts.map { JSONText.quoted($0.operation) + ":" + String($0.count) }.joined(separator: ",")
      + "}"
    let drops = driver.stalePageDrops
    let writeCache = driver.writeCache.map {
      "{\"dirtyLimit\":\($0.dirtyLimit),\"writers\":\(writebackWriters.load(ordering: .relaxed))}"
    }
    let guarded = revocation.counts
    let purgeCost = purgeCost.jsonObject
    let log = events.status
    let eventLog =
      "{\"id\":" + JSONText.quoted(log.id) + ",\"segment\":\(log.segment),\"bytes\":\(log.bytes)"
      + ",\"previousBytes\":\(log.previousBytes),\"segmentLimit\":\(events.limits.segmentBytes)"
      + ",\"droppedEvents\":\(log.droppedEvents),\"lostEvents\":\(log.lostEvents)"
      + ",\"coalescedRefusals\":\(log.coalescedRefusals)"
      + (log.lastError.map { ",\"error\":" + JSONText.quoted($0) } ?? "") + "}"
    let containers = device.map { ($0.all, $0.apps) }
    let unreadable = unreadableClasses.total
    let internalErrorCounts = internalErrors.jsonObject
    return storage.books.withLock { books in
      let ledger = books.ledger
      let catalog = books.catalog
      let usage = StorageDomain.allCases.map { JSONText.quoted($0.machineName) + ":" + String(ledger.usage($0)) }
      let purgeable = StorageDomain.purgeOrder.map {
        JSONText.quoted($0.machineName) + ":" + String(catalog.purgeableBytes(domain: $0))
      }
      let fields: [(String, String)] = [
        ("state", JSONText.quoted(snapshot.state.name)),
        ("cxExpired", snapshot.cxExpired ? "true" : "false"),
        ("backing", JSONText.quoted(bytes: backingPath)),
        ("defaultProtection", JSONText.quoted(options.defaultProtection.name)),
        ("gracePeriod", JSONText.number(options.gracePeriod)),
        ("cxTimeout", JSONText.number(options.inactivityTimeout)),
        ("capacity", String(ledger.capacity)),
        ("used", String(ledger.used)),
        ("free", String(ledger.free)),
        ("usage", "{" + usage.joined(separator: ",") + "}"),
        ("purgeable", "{" + purgeable.joined(separator: ",") + "}"),
        ("purgeableFiles", String(catalog.count)),
        ("purgePolicy", JSONText.quoted(catalog.policy.rawValue)),
        ("availableImportant", String(ledger.importantAvailableCapacity(purgeable: catalog.totalPurgeableBytes))),
        (
          "availableOpportunistic",
          String(ledger.opportunisticAvailableCapacity(purgeableTmp: catalog.purgeableBytes(domain: .tmp)))
        ),
        ("purges", String(books.purges)),
        ("bytesPurged", String(books.bytesPurged)),
        ("noSpaceRefusals", String(books.noSpaceRefusals)),
        ("refusals", refusals),
        ("unreadableClasses", String(unreadable)),
        ("internalErrors", internalErrorCounts),
        ("purgeCost", purgeCost),
        ("eventLog", eventLog),
        ("nodes", String(inodes.count)),
        ("retainedHandles", String(inodes.retainedCount)),
        ("descriptorLimit", String(ResourceLimits.openFiles)),
        ("passthrough", passthrough.isAvailable && revocation.isAvailable ? "true" : "false"),
        ("passthroughFiles", String(passthroughFiles.load(ordering: .relaxed))),
        ("passthroughArmed", String(guarded.armed)),
        ("passthroughRefused", String(guarded.refused)),
        (
          "busyPoll",
          "{\"microseconds\":\(busyPoll.microseconds),\"polled\":\(busyPoll.polled),\"waited\":\(busyPoll.waited)}"
        ),
        ("transport", transport),
        ("requests", requests),
        ("stalePages", "{\"dropped\":\(drops.dropped),\"lapsed\":\(drops.lapsed)}"),
        ("writeCache", writeCache ?? "null"),
      ]
      let device = deviceFields(ledger: ledger, catalog: catalog, containers: containers)
      return "{" + (fields + device).map { JSONText.quoted($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }
  }

  /// On a device: `"device":true` and each container (`"containers"`: id, kind, an app's
  /// groups or a group's members, usage in all and by domain, purgeable bytes); nothing on
  /// a plain mount. Called under the books' lock.
  private func deviceFields(
    ledger: QuotaLedger, catalog: PurgeCatalog,
    containers: ([ContainerNumber: DeviceContainers.Container], DeviceApps)?
  ) -> [(String, String)] {
    guard let (all, apps) = containers else { return [] }
    let groups = apps.groups
    let items = all.sorted { ($0.value.kind.rawValue, $0.value.id) < ($1.value.kind.rawValue, $1.value.id) }.map {
      number, container in
      let related = container.kind == .app ? apps.apps[container.id] ?? [] : groups[container.id] ?? []
      let usage = StorageDomain.allCases.map {
        JSONText.quoted($0.machineName) + ":" + String(ledger.usage(StorageArea(number, $0)))
      }
      let purgeable = StorageDomain.purgeOrder.map {
        JSONText.quoted($0.machineName) + ":" + String(catalog.purgeableBytes(domain: $0, container: number))
      }
      let fields: [(String, String)] = [
        ("id", JSONText.quoted(container.id.name)),
        ("kind", JSONText.quoted(container.kind.description)),
        (
          container.kind == .app ? "groups" : "members",
          "[" + related.map { JSONText.quoted($0.name) }.joined(separator: ",") + "]"
        ),
        ("path", JSONText.quoted(bytes: Array(container.components.joined(separator: [UInt8(ascii: "/")])))),
        ("used", String(ledger.usage(of: number))),
        ("usage", "{" + usage.joined(separator: ",") + "}"),
        ("purgeable", "{" + purgeable.joined(separator: ",") + "}"),
      ]
      return "{" + fields.map { JSONText.quoted($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }
    return [
      ("device", "true"), ("deviceUsed", String(ledger.usage(of: .top))),
      ("containers", "[" + items.joined(separator: ",") + "]"),
      ("confinement", confinementJSON()),
    ]
  }
}

extension SandboxFilesystem {
  /// The transport as a JSON object: the one in use, the one asked for, io_uring's shape,
  /// and why the one asked for is not in use.
  static func transportJSON(_ transport: TransportStatus) -> String {
    let fields: [(String, String)] = [
      ("inUse", JSONText.quoted(transport.inUse.rawValue)),
      ("requested", JSONText.quoted(transport.requested.rawValue)),
      ("queues", String(transport.queues)),
      ("workersPerQueue", String(transport.workersPerQueue)),
      ("bufferBytes", String(transport.bufferBytes)),
      ("fallbackReason", transport.fallbackReason.map { JSONText.quoted($0) } ?? "null"),
      ("cpuHandoff", transport.cpuHandoff.active ? "true" : "false"),
      ("handoffs", String(transport.cpuHandoff.handoffs)),
      ("handoffStalls", String(transport.cpuHandoff.stalls)),
      ("handoffOffReason", transport.cpuHandoff.offReason.map { JSONText.quoted($0) } ?? "null"),
    ]
    return "{" + fields.map { JSONText.quoted($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
  }
}
