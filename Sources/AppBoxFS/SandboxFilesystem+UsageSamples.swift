import AppBoxEvents
import Dispatch
import Posix
import SandboxPolicy

// MARK: - Periodic usage samples in the event log

extension SandboxFilesystem {
  /// Logs a ``UsageEvent`` for `reason` if ``UsageSample/shouldRecord(_:after:)`` says so
  /// (any thread holding no lock: it takes the quota lock once, then a leaf lock; a request
  /// thread calls it after a purge it carried out).
  func recordUsage(_ reason: UsageEvent.Reason) {
    let sample = storage.books.withLock { books in
      UsageSample(
        used: books.ledger.used, capacity: books.ledger.capacity, caches: books.ledger.usage(.caches),
        tmp: books.ledger.usage(.tmp), purges: books.purges, bytesPurged: books.bytesPurged,
        noSpace: books.noSpaceRefusals)
    }
    let state = protection.snapshot.state
    // Under the lock, so that two samplers log in the order they compared.
    lastUsage.withLock { last in
      guard sample.shouldRecord(reason, after: last) else { return }
      last = sample
      events.record(.usage(UsageEvent(time: Clock.unix(), sample: sample, state: state, reason: reason)))
    }
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
