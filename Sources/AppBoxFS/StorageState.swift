import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The quota books: usage per domain (and container), the catalog of purgeable files, and
/// counters, under one lock so that they never disagree.
///
/// Ownership rule: whoever unlinks a file's last name uncharges it (a program's unlink, or
/// a purge whose unlink succeeded), so a purge racing an unlink never uncharges twice.
/// The catalog holds the files a purge may take: regular files with one link, in Caches
/// or tmp; a purge takes its victims off the catalog first, so no two purges race.
///
/// Pins: an open pins its file under this lock before it returns (``pin(_:)``). A victim
/// stays in ``Books/inFlight`` until its unlink is done: an open that finds it there
/// before the purge commits to it takes it back (the purge then skips it); once
/// committed, the open waits for the unlink and fails with ESTALE, so the kernel looks
/// the name up again (and an `O_CREAT` open creates it afresh). Such waits sleep on
/// ``victimsSettled`` (a `Condition`), which every removal from `inFlight` notifies.
///
/// A victim in flight belongs to the purge that took it (``PurgePlan/serial``): files are
/// known by their backing inode number, and a number can name a file on the catalog
/// while a purge still holds it (a rename put the file back on the catalog; or the purge
/// has unlinked its victim, the number is free, and a new file got it before the purge's
/// ``finish(_:bytes:plan:)``). No purge takes a number that is in flight, and a purge's
/// steps (commit, finish, abandon, put back) act only on its own victims, so one purge
/// never settles another's, nor leaves a file off both the catalog and `inFlight` (where
/// an open would pin it nowhere) while a purge still goes on to unlink it.
final class StorageState: Sendable {
  struct Books: ~Copyable {
    var ledger: QuotaLedger
    let catalog: PurgeCatalog
    var purges = 0
    var bytesPurged: Int64 = 0
    var noSpaceRefusals = 0
    /// Victims taken off the catalog by a purge and not yet unlinked or given back.
    var inFlight: [UInt64: InFlight] = [:]
    /// The serial of the last purge plan (``PurgePlan/serial``).
    var plans: UInt64 = 0
    /// The top directories of subtrees moving to another domain (``beginMove(_:)``): no
    /// purge commits to a file inside them.
    var moving: [UInt64] = []
    /// Containers being removed (``beginRemoval(_:)``): nothing of theirs goes on the
    /// catalog, and no purge commits to a file of theirs.
    var closing: Set<ContainerNumber> = []
  }

  /// A victim on its way out; `committed` once the purge is about to unlink it.
  struct InFlight {
    var victim: PurgeCatalog.Victim
    /// The serial of the plan that took it (``PurgePlan/serial``).
    let plan: UInt64
    var committed = false
  }

  /// What ``pin(_:)`` found.
  enum Pin {
    /// Tracked in the catalog, now with one more open handle: no purge will take it.
    case pinned
    /// Not in the catalog (hard-linked, or already purged): nothing for a purge to take.
    case untracked
    /// A purge is unlinking it right now.
    case purging
  }

  /// A purge decided under the lock and carried out after it: unlink each victim.
  struct PurgePlan {
    var victims: [PurgeCatalog.Victim] = []
    /// Tells this plan's victims in flight from another purge's under the same number:
    /// its steps (``commit(_:plan:)`` and after) act only on its own.
    var serial: UInt64 = 0
    /// Each victim's directory path below the mount root, for events and the unlink.
    var directories: [[[UInt8]]] = []
    var reason: PurgeReason
    /// The container whose allocation needed the room (a purge under pressure).
    var requester: ContainerNumber? = nil
  }

  /// Lock order: held only for bookkeeping, never across a syscall; may be taken inside
  /// an inode's `allocated` lock (a move to another domain), never the other way round.
  let books: Mutex<Books>
  let waterMarks: WaterMarks?
  /// The backing inode of the purgeable file used last (to skip repeated touches).
  let lastTouched = Atomic<UInt64>(0)
  /// Notified whenever a victim leaves ``Books/inFlight`` (unlinked, given back, taken back
  /// by an open, left to whoever changed it, or dropped with a container being removed):
  /// what a request that met a purge half-way waits for (``waitUntilSettled(_:)``).
  let victimsSettled = Condition()

  init(ledger: QuotaLedger, catalog: sending PurgeCatalog, waterMarks: WaterMarks?) {
    books = Mutex(Books(ledger: ledger, catalog: catalog))
    self.waterMarks = waterMarks
  }

  /// Takes `need` bytes for a write or create if they are free; else takes purge victims
  /// (tmp first, then Caches; none of `sparing`) off the catalog for the caller to carry
  /// out.
  /// - Returns: the bytes granted, or nil with the purge to carry out first (nil, nil:
  ///   nothing to purge).
  func reserveOrPlan(
    _ need: Int64, area: StorageArea, sparing: Set<UInt64> = []
  ) -> (granted: Int64?, plan: PurgePlan?) {
    books.withLock { books in
      let shortfall = need - books.ledger.free
      if shortfall <= 0 {
        books.ledger.charge(area, delta: need)
        return (need, nil)
      }
      let victims = books.catalog.chooseVictims(toFree: shortfall, sparing: sparing)
      guard !victims.isEmpty else { return (nil, nil) }
      var plan = Self.take(victims, reason: .pressure, books: &books)
      plan.requester = area.container
      return (nil, plan)
    }
  }

  /// Takes what is free of `need` bytes.
  /// - Returns: the bytes granted, ≤ need.
  func reserveFree(_ need: Int64, area: StorageArea) -> Int64 {
    books.withLock { books in
      let granted = min(need, books.ledger.free)
      books.ledger.charge(area, delta: granted)
      return granted
    }
  }

  /// Takes victims off the catalog (so no other purge chooses them), recording their paths.
  /// None inside a subtree moving to another domain: ``beginMove(_:)`` gave those back,
  /// and once the move ends the catalog no longer knows where they went, so a victim taken
  /// meanwhile could be committed to and unlinked in its new place. None whose number is
  /// in flight for another purge (see the type's note): it stays on the catalog, where an
  /// open pins it, until that purge is done with the number.
  static func take(_ victims: [PurgeCatalog.Victim], reason: PurgeReason, books: inout Books) -> PurgePlan {
    books.plans &+= 1
    var plan = PurgePlan(serial: books.plans, reason: reason)
    plan.victims.reserveCapacity(victims.count)
    plan.directories.reserveCapacity(victims.count)
    for victim in victims where !isMoving(victim, books: books) && books.inFlight[victim.ino] == nil {
      let directory = books.catalog.path(of: victim.parent) ?? []
      guard books.catalog.removeFile(ino: victim.ino) else { continue }
      books.inFlight[victim.ino] = InFlight(victim: victim, plan: plan.serial)
      plan.victims.append(victim)
      plan.directories.append(directory)
    }
    return plan
  }

  // MARK: Pins and victims in flight

  /// Counts one more open handle of `inode`, a regular file in Caches or tmp, pinning it
  /// against purges; a victim a purge has not committed to yet is taken back.
  func pin(_ inode: Inode) -> Pin {
    let ino = inode.key.inode
    let (pin, tookBack) = books.withLock { books -> (Pin, Bool) in
      if books.catalog.open(ino: ino) {
        inode.openHandles.add(1, ordering: .relaxed)
        return (.pinned, false)
      }
      guard let flight = books.inFlight[ino] else {
        inode.openHandles.add(1, ordering: .relaxed)
        return (.untracked, false)
      }
      if flight.committed { return (.purging, false) }
      books.inFlight[ino] = nil
      Self.restore(flight.victim, books: &books)
      books.catalog.open(ino: ino)
      inode.openHandles.add(1, ordering: .relaxed)
      return (.pinned, true)
    }
    if tookBack { victimsSettled.notifyAll() }
    return pin
  }

  /// Counts a closed handle of a file in Caches or tmp.
  func unpin(_ inode: Inode) {
    books.withLock { books in
      inode.openHandles.subtract(1, ordering: .relaxed)
      books.catalog.close(ino: inode.key.inode)
    }
  }

  /// Commits the purge `plan` to unlinking `ino`, unless an open took it back (or another
  /// purge holds the number now) or it is on the catalog again (a rename put it there).
  /// - Returns: the bytes the books hold for it (its last measurement's, which the victim
  ///   in flight recorded), if it is to be unlinked; nil if not. Read now, before the
  ///   unlink frees the number for a new file, whose measurements would be taken for it.
  func commit(_ ino: UInt64, plan: UInt64) -> Int64? {
    let (committed, left) = books.withLock { books -> (Int64?, Bool) in
      guard let flight = books.inFlight[ino], flight.plan == plan else { return (nil, false) }
      guard !books.catalog.contains(ino: ino) else {
        books.inFlight[ino] = nil
        return (nil, true)
      }
      if books.closing.contains(flight.victim.container) {
        books.inFlight[ino] = nil  // its container is being removed, files and all
        return (nil, true)
      }
      if Self.isMoving(flight.victim, books: books) {
        books.inFlight[ino] = nil
        Self.restore(flight.victim, books: &books)
        return (nil, true)
      }
      books.inFlight[ino]!.committed = true
      return (flight.victim.bytes, false)
    }
    if left { victimsSettled.notifyAll() }
    return committed
  }

  /// A victim of the purge `plan` unlinked: `bytes` (its allocation as charged) leave the
  /// books. The purge removed its last name, so it gives the bytes back (the ownership
  /// rule above); its number, free since the unlink, may be a new file's by now.
  func finish(_ victim: PurgeCatalog.Victim, bytes: Int64, plan: UInt64) {
    books.withLock { books in
      if books.inFlight[victim.ino]?.plan == plan { books.inFlight[victim.ino] = nil }
      books.ledger.charge(StorageArea(victim.container, victim.domain), delta: -bytes)
      books.purges += 1
      books.bytesPurged += bytes
    }
    victimsSettled.notifyAll()
  }

  /// A victim of the purge `plan` whose name no longer refers to it (unlinked, renamed or
  /// linked by a program meanwhile): the purge leaves it to whoever changed it.
  func abandon(_ ino: UInt64, plan: UInt64) {
    books.withLock { books in
      if books.inFlight[ino]?.plan == plan { books.inFlight[ino] = nil }
    }
    victimsSettled.notifyAll()
  }

  /// Sleeps until no purge holds `ino` any more: the purge that committed to it has
  /// unlinked it, or given it up.
  func waitUntilSettled(_ ino: UInt64) {
    victimsSettled.wait(for: books) { $0.inFlight[ino] == nil }
  }

  /// A victim the purge `plan` could not unlink: back on the catalog, purgeable again.
  func putBack(_ ino: UInt64, plan: UInt64) {
    books.withLock { books in
      guard let flight = books.inFlight[ino], flight.plan == plan else { return }
      books.inFlight[ino] = nil
      Self.restore(flight.victim, books: &books)
    }
    victimsSettled.notifyAll()
  }

  /// Adds a victim back to the catalog, if its directory is still tracked.
  private static func restore(_ victim: PurgeCatalog.Victim, books: inout Books) {
    let catalog = books.catalog
    guard !books.closing.contains(victim.container), !catalog.contains(ino: victim.ino),
      !catalog.containsDirectory(ino: victim.ino)
    else { return }
    if case .directory(let parent) = victim.parent, !catalog.containsDirectory(ino: parent) { return }
    catalog.addFile(
      ino: victim.ino, parent: victim.parent, name: victim.name, bytes: victim.bytes, urgency: victim.urgency,
      lastUse: victim.lastUse)
  }

  // MARK: Subtrees moving between domains

  /// Starts moving the subtrees under the directories `roots` to another domain: from now
  /// until ``endMove(_:)`` no purge commits to a file inside them (it puts the file back),
  /// a victim not committed to yet goes back on the catalog, and the victims already
  /// committed to are returned: the caller waits for them (``waitForVictims(_:)``)
  /// before the rename, so that no purge unlinks by a directory descriptor or path taken
  /// before the move a file that is now in another domain.
  func beginMove(_ roots: [UInt64]) -> [UInt64] {
    let (committed, restored) = books.withLock { books -> ([UInt64], Bool) in
      books.moving = roots
      var committed: [UInt64] = []
      var restored = false
      for (ino, flight) in books.inFlight where Self.isMoving(flight.victim, books: books) {
        if flight.committed {
          committed.append(ino)
        } else {
          books.inFlight[ino] = nil
          Self.restore(flight.victim, books: &books)
          restored = true
        }
      }
      return (committed, restored)
    }
    if restored { victimsSettled.notifyAll() }
    return committed
  }

  /// Waits until the purges that committed to `victims` have unlinked them (or let them go).
  func waitForVictims(_ victims: [UInt64]) {
    for ino in victims { waitUntilSettled(ino) }
  }

  /// Ends a move: `update` brings the catalog up to date, then purges may take the
  /// subtrees' files again.
  func endMove(_ update: (inout Books) -> Void) {
    books.withLock { books in
      update(&books)
      books.moving = []
    }
  }

  /// Whether `victim` is inside a subtree that is moving to another domain.
  private static func isMoving(_ victim: PurgeCatalog.Victim, books: borrowing Books) -> Bool {
    guard !books.moving.isEmpty, let parent = victim.parent.directoryInode else { return false }
    return books.moving.contains { books.catalog.isDirectory(parent, inside: $0) }
  }

  // MARK: Containers being removed

  /// Starts removing the containers `numbers`: their files leave the catalog, no purge
  /// commits to one of them from now on (a victim not committed to yet is dropped), and
  /// nothing of theirs goes on the catalog again. The victims already committed to are
  /// returned: the caller waits for them (``waitForVictims(_:)``) before it moves the
  /// containers away, so that no purge unlinks by a path that no longer leads there.
  func beginRemoval(_ numbers: Set<ContainerNumber>) -> [UInt64] {
    let (committed, dropped) = books.withLock { books -> ([UInt64], Bool) in
      books.closing.formUnion(numbers)
      var committed: [UInt64] = []
      var dropped = false
      for (ino, flight) in books.inFlight where numbers.contains(flight.victim.container) {
        if flight.committed {
          committed.append(ino)
        } else {
          books.inFlight[ino] = nil
          dropped = true
        }
      }
      for number in numbers { books.catalog.removeContainer(number) }
      return (committed, dropped)
    }
    if dropped { victimsSettled.notifyAll() }
    return committed
  }

  /// Ends removing containers: what is still charged to them (files a program made in
  /// them meanwhile, which stay until the next mount) is left on the books.
  func endRemoval(_ numbers: Set<ContainerNumber>) {
    books.withLock { books in
      books.closing.subtract(numbers)
      for number in numbers { books.catalog.containerPaths[number] = nil }
    }
  }

  /// Plans an explicit or background purge.
  func plan(reason: PurgeReason, _ choose: (PurgeCatalog, QuotaLedger) -> [PurgeCatalog.Victim]) -> PurgePlan {
    books.withLock { books in
      let victims = choose(books.catalog, books.ledger)
      return Self.take(victims, reason: reason, books: &books)
    }
  }

  /// Records an allocation change of `area` (and of the file's catalog entry).
  /// - Returns: how far usage is now above the capacity (0 when within it).
  @discardableResult
  func charge(_ delta: Int64, area: StorageArea, trackedFile ino: UInt64? = nil, newBytes: Int64 = 0) -> Int64 {
    books.withLock { books in
      books.ledger.charge(area, delta: delta)
      if let ino, !books.catalog.setBytes(ino: ino, newBytes) { books.inFlight[ino]?.victim.bytes = newBytes }
      return delta > 0 ? max(0, books.ledger.used - books.ledger.capacity) : 0
    }
  }

  /// Moves `bytes` of usage from one area to another: an item that changed domain.
  func move(_ bytes: Int64, from: StorageArea, to: StorageArea) {
    guard bytes != 0, from != to else { return }
    books.withLock { books in
      books.ledger.charge(from, delta: -bytes)
      books.ledger.charge(to, delta: bytes)
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
