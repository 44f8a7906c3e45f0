import Posix
import SandboxPolicy
import Synchronization

/// The quota books: usage per domain, the catalog of purgeable files, and counters, under
/// one lock so that they never disagree.
///
/// Ownership rule: whoever unlinks a file's last name uncharges it (a program's unlink, or
/// a purge whose unlink succeeded), so a purge racing an unlink never uncharges twice.
/// The catalog holds the files a purge may take: regular files with one link, in Caches
/// or tmp; a purge takes its victims off the catalog first, so no two purges race.
final class StorageState: Sendable {
  struct Books: ~Copyable {
    var ledger: QuotaLedger
    let catalog: PurgeCatalog
    var purges = 0
    var bytesPurged: Int64 = 0
    var noSpaceRefusals = 0
  }

  /// A purge decided under the lock and carried out after it: unlink each victim.
  struct PurgePlan {
    var victims: [PurgeCatalog.Victim] = []
    /// Each victim's directory path below the mount root, for events and the unlink.
    var directories: [[[UInt8]]] = []
    var reason: PurgeEvent.Reason
  }

  /// Lock order: a leaf lock; held only for bookkeeping, never across a syscall.
  let books: Mutex<Books>
  let waterMarks: WaterMarks?
  /// The backing inode of the purgeable file used last (to skip repeated touches).
  let lastTouched = Atomic<UInt64>(0)

  init(ledger: QuotaLedger, catalog: sending PurgeCatalog, waterMarks: WaterMarks?) {
    books = Mutex(Books(ledger: ledger, catalog: catalog))
    self.waterMarks = waterMarks
  }

  /// Takes `need` bytes for a write or create if they are free; else takes purge victims
  /// (tmp first, then Caches) off the catalog for the caller to carry out.
  /// - Returns: the bytes granted, or nil with the purge to carry out first (nil, nil:
  ///   nothing to purge).
  func reserveOrPlan(_ need: Int64, domain: StorageDomain) -> (granted: Int64?, plan: PurgePlan?) {
    books.withLock { books in
      let shortfall = need - books.ledger.free
      if shortfall <= 0 {
        books.ledger.charge(domain: domain, delta: need)
        return (need, nil)
      }
      let victims = books.catalog.chooseVictims(toFree: shortfall)
      return (nil, victims.isEmpty ? nil : Self.take(victims, reason: .pressure, books: &books))
    }
  }

  /// Takes what is free of `need` bytes.
  /// - Returns: the bytes granted, ≤ need.
  func reserveFree(_ need: Int64, domain: StorageDomain) -> Int64 {
    books.withLock { books in
      let granted = min(need, books.ledger.free)
      books.ledger.charge(domain: domain, delta: granted)
      return granted
    }
  }

  /// Takes victims off the catalog (so no other purge chooses them), recording their paths.
  static func take(_ victims: [PurgeCatalog.Victim], reason: PurgeEvent.Reason, books: inout Books) -> PurgePlan {
    var plan = PurgePlan(reason: reason)
    plan.victims.reserveCapacity(victims.count)
    plan.directories.reserveCapacity(victims.count)
    for victim in victims {
      let directory: [[UInt8]]
      switch victim.parent {
      case .root(let domain): directory = domain.rootComponents
      case .directory(let ino): directory = books.catalog.path(ofDirectory: ino) ?? []
      }
      guard books.catalog.removeFile(ino: victim.ino) else { continue }
      plan.victims.append(victim)
      plan.directories.append(directory)
    }
    return plan
  }

  /// Uncharges the victims a purge unlinked, and counts them.
  func purged(_ victims: [PurgeCatalog.Victim]) {
    books.withLock { books in
      for victim in victims {
        books.ledger.charge(domain: victim.domain, delta: -victim.bytes)
        books.purges += 1
        books.bytesPurged += victim.bytes
      }
    }
  }

  /// Plans an explicit or background purge.
  func plan(reason: PurgeEvent.Reason, _ choose: (PurgeCatalog, QuotaLedger) -> [PurgeCatalog.Victim]) -> PurgePlan {
    books.withLock { books in
      let victims = choose(books.catalog, books.ledger)
      return Self.take(victims, reason: reason, books: &books)
    }
  }

  /// Records an allocation change of `domain` (and of the file's catalog entry).
  func charge(_ delta: Int64, domain: StorageDomain, trackedFile ino: UInt64? = nil, newBytes: Int64 = 0) {
    books.withLock { books in
      books.ledger.charge(domain: domain, delta: delta)
      if let ino { books.catalog.setBytes(ino: ino, newBytes) }
    }
  }

  /// Bytes above the high water mark's target, if the background purger should run.
  var backgroundPurgeNeed: Int64 {
    guard let waterMarks else { return 0 }
    return books.withLock { waterMarks.needsBackgroundPurge($0.ledger) }
  }

  /// Counts an ENOSPC refusal.
  func countNoSpace() {
    books.withLock { $0.noSpaceRefusals += 1 }
  }
}
