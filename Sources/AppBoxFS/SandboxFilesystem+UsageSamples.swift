import AppBoxEvents
import Dispatch
import Posix
import SandboxPolicy

// MARK: - Periodic usage samples in the event log

extension SandboxFilesystem {
  /// Logs a ``UsageEvent`` for `reason` if ``UsageSample/shouldRecord(_:after:)`` says so
  /// (any thread holding no lock: it takes the quota lock once, then a leaf lock; a request
  /// thread calls it after a purge it carried out).
  /// On a device, each container whose usage changed since the last sample logged
  /// (every one at mount, capacity changes and unmount) follows as a
  /// ``ContainerUsageEvent``.
  func recordUsage(_ reason: UsageEvent.Reason) {
    let containers = device?.all ?? [:]
    let (sample, figures) = storage.books.withLock { books in
      let sample = UsageSample(
        used: books.ledger.used, capacity: books.ledger.capacity, caches: books.ledger.usage(.caches),
        tmp: books.ledger.usage(.tmp), purges: books.purges, bytesPurged: books.bytesPurged,
        noSpace: books.noSpaceRefusals)
      var figures: [ContainerNumber: ContainerFigures] = [:]
      for number in containers.keys {
        figures[number] = ContainerFigures(
          used: books.ledger.usage(of: number), caches: books.ledger.usage(StorageArea(number, .caches)),
          tmp: books.ledger.usage(StorageArea(number, .tmp)))
      }
      return (sample, figures)
    }
    let state = protection.snapshot.state
    // Under the lock, so that two samplers log in the order they compared.
    lastUsage.withLock { last in
      guard sample.shouldRecord(reason, after: last.sample) else { return }
      last.sample = sample
      let time = Clock.unix()
      var lines: [AppBoxEvent] = [.usage(UsageEvent(time: time, sample: sample, state: state, reason: reason))]
      for (number, container) in containers.sorted(by: { $0.key < $1.key }) {
        guard let now = figures[number], reason != .interval && reason != .purge || last.containers[number] != now
        else { continue }
        last.containers[number] = now
        lines.append(
          .containerUsage(
            ContainerUsageEvent(
              time: time, container: container.id.name, kind: container.kind, used: now.used, caches: now.caches,
              tmp: now.tmp, reason: reason)))
      }
      events.record(lines)
    }
  }

  /// What a ``ContainerUsageEvent`` says of one container.
  struct ContainerFigures: Hashable, Sendable {
    var used: Int64
    var caches: Int64
    var tmp: Int64
  }

  /// The last usage sample logged, and each container's figures as last logged.
  struct LastUsage: Sendable {
    var sample: UsageSample?
    var containers: [ContainerNumber: ContainerFigures] = [:]
  }

  /// Samples the usage every `--usage-interval` on the maintenance queue (none when 0).
  func scheduleUsageSamples() {
    let interval = options.usageInterval
    guard interval > 0 else { return }
    maintenance.asyncAfter(deadline: .now() + interval) { [weak self] in
      guard let self else { return }
      recordUsage(.interval)
      scheduleUsageSamples()
    }
  }

  /// The mount is going away: logs the last usage sample and waits until every event is
  /// written.
  public func unmounted() {
    recordUsage(.unmount)
    events.flush()
  }
}
