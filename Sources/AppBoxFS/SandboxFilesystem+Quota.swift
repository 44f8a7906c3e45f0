import AppBoxEvents
import Dispatch
import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Quota: reservations, accounting, purging

extension SandboxFilesystem {
  /// Bytes a write of `count` at `offset` may newly allocate, plus one block for the
  /// filesystem's own metadata. A file whose blocks cover its size (as its last
  /// measurement counted them) has no holes to fill: only what the write puts past the
  /// last covered block needs room. Any other file may have holes anywhere below its end,
  /// and the whole write is reserved: writes do not come in file order (the kernel's
  /// write-back of a file runs on several workers at once), so "past the allocated byte
  /// count" is no measure of what a write fills. The real change is measured afterwards
  /// (``account(_:fd:)``).
  func growthEstimate(_ inode: Inode, offset: off_t, count: Int) -> Int64 {
    let (allocated, size) = inode.allocated.withLock { ($0, inode.measuredSize.load(ordering: .relaxed)) }
    let end = Int64(offset) + Int64(count)
    let covered = AllocationBlocks.roundUp(size)
    guard allocated >= covered else { return AllocationBlocks.withMetadata(Int64(count)) }
    guard end > covered else { return 0 }
    return AllocationBlocks.withMetadata(min(Int64(count), end - covered))
  }

  /// Takes `need` bytes from the quota for `area`, purging tmp and Caches if they are
  /// not free (of every container of a device: the purge order is the device's). A purge can free less than its plan counted on (an open took a victim
  /// back, an unlink failed, another writer took the bytes first): then it plans again,
  /// without the victims already tried, up to ``purgeRounds`` times.
  /// - Returns: the bytes granted, ≤ need.
  func reserve(_ need: Int64, area: StorageArea) -> Reservation {
    guard need > 0 else { return Reservation(bytes: 0, area: area, storage: storage) }
    var tried = Set<UInt64>()
    for round in 0..<Self.purgeRounds {
      let (granted, plan) = storage.reserveOrPlan(need, area: area, sparing: tried)
      if let granted { return Reservation(bytes: granted, area: area, storage: storage) }
      guard let plan, !plan.victims.isEmpty else { break }
      if round == 0 { driver.handOff() }  // unlinking the victims may take a while
      tried.formUnion(plan.victims.lazy.map(\.ino))
      carryOut(plan, onRequestThread: true)
    }
    return Reservation(bytes: storage.reserveFree(need, area: area), area: area, storage: storage)
  }

  /// How many purges one reservation may carry out.
  static let purgeRounds = 4

  /// Reserves exactly `bytes` or fails with ENOSPC (after purging what it could).
  func reserveAll(_ bytes: Int64, area: StorageArea) throws(Errno) -> Reservation {
    let reservation = reserve(bytes, area: area)
    guard reservation.bytes < bytes else { return reservation }
    reservation.cancel()
    storage.countNoSpace()
    throw .noSpace
  }

  /// Runs a change of `inode`'s extended attributes within the quota: reserves what a
  /// value of `valueBytes` may take (ENOSPC when it does not fit, after purging), then
  /// measures the file's allocation, which counts the attribute blocks as `du` does.
  func changingAttributes(_ inode: Inode, valueBytes: Int, _ body: () throws(Errno) -> Void) throws(Errno) {
    let reservation = try reserveAll(AllocationBlocks.roundUp(Int64(valueBytes)), area: inode.area)
    do throws(Errno) { try body() } catch {
      settle(reservation, inode, fd: inode.fd)  // a failed change may still have allocated
      throw error
    }
    settle(reservation, inode, fd: inode.fd)
  }

  /// Measures `inode`'s allocation after the change `reservation` was taken for, and
  /// settles the quota (see ``measure(_:fd:reserved:reservedIn:lookedUp:)``).
  @discardableResult
  func settle(_ reservation: consuming Reservation, _ inode: Inode, fd: Int32, lookedUp: stat? = nil) -> stat? {
    let (reserved, area) = reservation.handOver()
    return measure(inode, fd: fd, reserved: reserved, reservedIn: area, lookedUp: lookedUp)
  }

  /// Measures `inode`'s allocation after a change that reserved nothing (a truncate, an
  /// fsync, a release) and charges the difference.
  @discardableResult
  func account(_ inode: Inode, fd: Int32) -> stat? {
    measure(inode, fd: fd, reserved: 0, reservedIn: inode.area, lookedUp: nil)
  }

  /// What a measurement found.
  private enum Measurement {
    /// The file's allocation now, `delta` from what was charged, in `area`.
    case measured(delta: Int64, now: Int64, st: stat, area: StorageArea)
    /// Purged: taken off the books with its last name.
    case offBooks
    /// Unlinked, and no handle left open: `charged` bytes it kept charged (in `area`) go
    /// back, as the backing filesystem frees its blocks.
    case released(charged: Int64, area: StorageArea)
    /// The `fstat` failed: the reservation was added to the file's charge (now `charged`,
    /// in `area`), the worst case of what the change allocated.
    case unmeasured(Errno, charged: Int64, area: StorageArea)
  }

  /// Measures `inode`'s allocation after a change and settles the quota: the difference to
  /// what was charged before, minus what was reserved (in `reservedIn`) for the change.
  /// `lookedUp`: the status the node's lookup read after the change, which saves the
  /// `fstat` unless the node was measured since (that measurement read a newer one). A file
  /// that cannot be measured never undercharges: what was reserved for the change stays
  /// charged to it (logged and counted), and its next measurement settles the difference.
  /// - Returns: the file's attributes as measured (nil when it was off the books, or
  ///   could not be measured).
  private func measure(
    _ inode: Inode, fd: Int32, reserved: Int64, reservedIn reservedArea: StorageArea, lookedUp: stat?
  ) -> stat? {
    // Measured under the inode's lock, which `untrack` and a move to another domain take
    // too: a close racing an unlink either settles before the unlink gives the bytes back,
    // or sees no link left; one racing a move charges the domain the move found.
    let measured = inode.allocated.withLock { charged -> Measurement in
      if inode.purged.load(ordering: .relaxed) { return .offBooks }
      let st: stat
      if let lookedUp, !inode.measuredOnce.load(ordering: .relaxed) {
        st = lookedUp
      } else {
        do throws(Errno) { st = try Sys.fstat(fd) } catch {
          charged += reserved
          return .unmeasured(error, charged: charged, area: inode.area)
        }
      }
      if st.st_nlink == 0 {
        // No name left: its blocks stay allocated while a handle is open, through which a
        // program may go on writing, so it stays charged as any file (or it could write
        // past the capacity); once none is open, what it was charged goes back.
        guard inode.openHandles.load(ordering: .acquiring) > 0 else {
          inode.chargedUnlinked.store(false, ordering: .relaxed)
          defer { charged = 0 }
          return .released(charged: charged, area: inode.area)
        }
        inode.chargedUnlinked.store(true, ordering: .relaxed)
      }
      inode.measuredOnce.store(true, ordering: .relaxed)
      let now = Int64(st.st_blocks) * 512
      let before = inode.measuredSize.exchange(Int64(st.st_size), ordering: .relaxed)
      if charged < AllocationBlocks.roundUp(before) || now < AllocationBlocks.roundUp(Int64(st.st_size)) {
        inode.mayReshapeAtWriteBack.store(true, ordering: .relaxed)  // holes before or after the change
      }
      defer { charged = now }
      return .measured(delta: now - charged, now: now, st: st, area: inode.area)
    }
    let (delta, now, st, area): (Int64, Int64, stat, StorageArea)
    switch measured {
    case .offBooks:
      if reserved != 0 { storage.charge(-reserved, area: reservedArea) }
      return nil
    case .released(let kept, let area):
      writeMapped.remove(inode.key)  // unlinked, and no handle left: unreachable
      if reserved != 0 { storage.charge(-reserved, area: reservedArea) }
      if kept != 0 { storage.charge(-kept, area: area) }
      return nil
    case .unmeasured(let error, let charged, let area):
      if area != reservedArea { storage.move(reserved, from: reservedArea, to: area) }
      if area.domain.isPurgeable, inode.isRegularFile {
        storage.charge(0, area: area, trackedFile: inode.key.inode, newBytes: charged)
      }
      internalError(
        .measure, error,
        "cannot measure \(String(decoding: mountPath(of: inode), as: UTF8.self)) after a change; the \(reserved) bytes reserved for it stay charged"
      )
      return nil
    case .measured(let measuredDelta, let measuredNow, let measuredStat, let measuredArea):
      (delta, now, st, area) = (measuredDelta, measuredNow, measuredStat, measuredArea)
    }
    var reserved = reserved
    if area != reservedArea, reserved != 0 {
      storage.charge(-reserved, area: reservedArea)  // the file moved to another domain meanwhile
      reserved = 0
    }
    let tracked = area.domain.isPurgeable && inode.isRegularFile && st.st_nlink > 0 ? inode.key.inode : nil
    if delta != reserved || tracked != nil {
      let over = storage.charge(delta - reserved, area: area, trackedFile: tracked, newBytes: now)
      if over > 0 { purgeOverflow(over) }
    }
    return st
  }

  /// Purges what an allocation nobody could reserve for put above the capacity: blocks
  /// the backing filesystem allocates at writeback (an extent block), a shared mmap's.
  private func purgeOverflow(_ bytes: Int64) {
    let plan = storage.plan(reason: .pressure) { catalog, _ in catalog.chooseVictims(toFree: bytes) }
    if !plan.victims.isEmpty { carryOut(plan, onRequestThread: true) }
  }

  /// Records a use of a purgeable file for the LRU order. Repeated uses of the file that
  /// was used last, within the same second, change nothing and skip the lock.
  @inline(__always)
  func touch(_ inode: Inode) {
    guard inode.domain.isPurgeable else { return }
    let now = UInt32(clamping: Int(Clock.unix()))
    let ino = inode.key.inode
    let previous = inode.lastTouch.exchange(now, ordering: .relaxed)
    if previous == now && storage.lastTouched.load(ordering: .relaxed) == ino { return }
    storage.lastTouched.store(ino, ordering: .relaxed)
    storage.books.withLock { _ = $0.catalog.touch(ino: ino, at: now) }
  }

  /// The catalog parent of entries in `directory` (nil outside Caches and tmp).
  func catalogParent(_ directory: Inode) -> PurgeCatalog.Parent? {
    guard directory.domain.isPurgeable else { return nil }
    if let fixed = directory.fixed { return .root(fixed.domain, container: directory.container) }
    return .directory(directory.key.inode)
  }

  // MARK: Purging

  /// Unlinks the victims of a plan (taken off the catalog, in flight), records an event
  /// for each, and tells the kernel to forget them: before returning when
  /// `onRequestThread` is false (a control or maintenance thread: when `appbox purge`
  /// returns, no program sees a purged file any more), else from the maintenance queue (a
  /// notification must never be sent from a request thread). Directories are worked on in
  /// parallel (unlinks in different directories do not contend). A victim an open took
  /// back is skipped; one whose unlink fails goes back on the catalog (and is logged).
  /// `progress` hears of the files and bytes unlinked so far, every
  /// ``purgeProgressInterval`` files (from the threads doing the unlinks).
  /// - Returns: the victims unlinked, with the bytes they gave back.
  @discardableResult
  func carryOut(
    _ plan: StorageState.PurgePlan, onRequestThread: Bool, progress: PurgeProgress? = nil
  ) -> [PurgeCatalog.Victim] {
    let unlinked = Atomic<Int>(0)
    let unlinkedBytes = Atomic<Int64>(0)
    var groups: [[[UInt8]]: [Int]] = [:]
    for (index, components) in plan.directories.enumerated() { groups[components, default: []].append(index) }
    let work = Array(groups)
    // `directory`: the backing inode of the directory the name was unlinked from, which
    // the kernel is told about (the catalog's record of it may be out of date).
    let removed = Mutex<[(index: Int, cached: Inode?, bytes: Int64, directory: UInt64?)]>([])
    DispatchQueue.concurrentPerform(iterations: work.count) { group in
      let (components, indices) = work[group]
      let directoryFD: Int32
      do throws(Errno) { directoryFD = try openDirectory(components) } catch {
        for index in indices { storage.putBack(plan.victims[index].ino, plan: plan.serial) }
        // Renamed or removed since the plan: its victims were left to whoever changed it.
        if error != .noEntry && error != .notDirectory {
          internalError(
            .purgeDirectory, error,
            "purge: cannot open \(String(decoding: Array(components.joined(separator: [0x2F])), as: UTF8.self)); its \(indices.count) files stay"
          )
        }
        return
      }
      defer { Sys.close(directoryFD) }
      let directory: UInt64?
      do throws(Errno) { directory = UInt64(try Sys.fstat(directoryFD).st_ino) } catch {
        // The catalog's record of it, which a rename since the plan may have outdated.
        let victim = plan.victims[indices[0]]
        directory =
          victim.parent.directoryInode
          ?? domainRoots.withLock { $0[StorageArea(victim.container, victim.domain)] }
        internalError(
          .purgeNotice, error,
          "purge: cannot identify the directory of \(String(decoding: victim.name, as: UTF8.self)); the kernel is told of its purged names as the catalog recorded it"
        )
      }
      var done: [(index: Int, cached: Inode?, bytes: Int64, directory: UInt64?)] = []
      for index in indices {
        let victim = plan.victims[index]
        // nil: an open took it back
        guard let booked = storage.commit(victim.ino, plan: plan.serial) else { continue }
        switch unlinkVictim(victim, booked: booked, in: directoryFD) {
        case .unlinked(let cached, let bytes):
          storage.finish(victim, bytes: bytes, plan: plan.serial)
          done.append((index, cached, bytes, directory))
          if let progress {
            let total = unlinkedBytes.add(bytes, ordering: .relaxed).newValue
            let files = unlinked.add(1, ordering: .relaxed).newValue
            if files % SandboxFilesystem.purgeProgressInterval == 0 { progress(files, total) }
          }
        case .changed:
          storage.abandon(victim.ino, plan: plan.serial)
        case .failed(let error):
          storage.putBack(victim.ino, plan: plan.serial)
          log("purge: cannot unlink \(String(decoding: victim.name, as: UTF8.self)): \(error); kept")
        }
      }
      removed.withLock { $0 += done }
    }
    let purged = removed.withLock { $0 }.sorted { $0.index < $1.index }  // events in purge order
    guard !purged.isEmpty else { return [] }
    let now = Clock.unix()
    let names = device.map { device in device.all.mapValues(\.id.name) } ?? [:]
    let requester = plan.requester.flatMap { names[$0] }
    events.record(
      purged.map { item in
        let victim = plan.victims[item.index]
        var event = PurgeEvent(
          time: now, path: plan.directories[item.index] + [victim.name], bytes: item.bytes, domain: victim.domain,
          reason: plan.reason, lastUse: Double(victim.lastUse))
        event.container = names[victim.container]
        event.requester = requester
        return .purge(event)
      })
    // The usage right after the purge, so a report's usage line drops with it (a shrink's
    // purge is followed by the capacity change's sample instead).
    if plan.reason != .shrink { recordUsage(.purge) }
    let roots = domainRoots.withLock { $0 }
    purgeCost.purged(
      purged.compactMap { item in
        let victim = plan.victims[item.index]
        guard
          let directory = victim.parent.directoryInode ?? roots[StorageArea(victim.container, victim.domain)]
        else { return nil }
        return (PurgedNames.Key(directory: directory, name: victim.name), item.bytes)
      }, time: now)
    let notify: @Sendable () -> Void = { [self, purged] in
      guard let notifier = notifier.withLock({ $0 }) else { return }
      for item in purged {
        let victim = plan.victims[item.index]
        // Only about a directory the kernel holds: a notification about anything else
        // fails (ENOTDIR), and the kernel has no entry to drop then anyway.
        guard let parentIno = item.directory, let parent = inodes.existing(backingInode: parentIno),
          parent.isDirectory
        else { continue }
        if let child = item.cached {
          notifier.delete(parent: inodes.node(parent), child: inodes.node(child), name: victim.name)
        } else {
          notifier.invalidateEntry(parent: inodes.node(parent), name: victim.name)
        }
      }
    }
    if onRequestThread { maintenance.async(execute: notify) } else { notify() }
    return purged.map { item in
      var victim = plan.victims[item.index]
      victim.bytes = item.bytes
      return victim
    }
  }

  /// What became of one victim.
  private enum VictimOutcome {
    /// Unlinked; `bytes` is its allocation as charged.
    case unlinked(cached: Inode?, bytes: Int64)
    /// Its name no longer refers to it alone (unlinked, replaced or linked meanwhile).
    case changed
    /// The unlink failed.
    case failed(Errno)
  }

  /// Unlinks a committed victim by name, if the name is still that file and its only one.
  /// The inode the kernel may hold is marked purged first (under its allocation's lock,
  /// so an `account` racing the unlink either settles before or sees it purged). What it
  /// gives back is its node's charge, or, with no node, `booked` (``StorageState/commit(_:plan:)``):
  /// not what the file has allocated at the unlink, since what the backing filesystem
  /// allocated after its last measurement (at writeback) was never charged.
  private func unlinkVictim(_ victim: PurgeCatalog.Victim, booked: Int64, in directoryFD: Int32) -> VictimOutcome {
    let name = victim.name + [0]
    return name.withUnsafeBufferPointer { buffer -> VictimOutcome in
      let cname = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
      let st: stat
      do throws(Errno) { st = try Sys.fstatat(directoryFD, cname, AT_SYMLINK_NOFOLLOW) } catch {
        return error == .noEntry ? .changed : .failed(error)
      }
      guard UInt64(st.st_ino) == victim.ino, st.st_nlink == 1 else { return .changed }
      let cached = inodes.existing(backingInode: victim.ino)
      cached?.allocated.withLock { _ in cached?.purged.store(true, ordering: .relaxed) }
      do throws(Errno) { try Sys.unlinkat(directoryFD, cname, 0) } catch {
        cached?.purged.store(false, ordering: .relaxed)
        return error == .noEntry ? .changed : .failed(error)
      }
      if cached == nil {
        // A lookup may have made a node from a status read before the unlink.
        purgeUnlinks.add(1, ordering: .sequentiallyConsistent)
        if let late = inodes.existing(backingInode: victim.ino) {
          do throws(Errno) {
            if try Sys.fstat(late.fd).st_nlink == 0 { markPurged(late) }
          } catch {
            internalError(
              .measure, error,
              "purge: cannot measure a node made while \(String(decoding: victim.name, as: UTF8.self)) was unlinked; if it is that file, its charge may be given back twice"
            )
          }
        }
      }
      let bytes =
        cached?.allocated.withLock { charged in
          defer { charged = 0 }
          return charged
        } ?? booked
      return .unlinked(cached: cached, bytes: bytes)
    }
  }

  /// Writes a line to the daemon's log (its standard error): errors that change nothing
  /// a program sees, but that must not go unnoticed.
  func log(_ message: String) {
    let line = Array("appbox: \(message)\n".utf8)
    // Absent is all there is: the log is where errors go, and a failed write to it has
    // nowhere left to be reported.
    _ = line.withUnsafeBytes { try? Sys.write(2, $0) }
  }

  /// Opens a directory below the backing root by components, following no symlink.
  private func openDirectory(_ components: [[UInt8]]) throws(Errno) -> Int32 {
    var fd = try Sys.dup(inodes.root.fd)
    for component in components {
      let name = component + [0]
      let next: Int32
      do throws(Errno) {
        next = try name.withUnsafeBufferPointer { (buffer) throws(Errno) -> Int32 in
          try Sys.openat(
            fd, UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
            Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        }
      } catch {
        Sys.close(fd)
        throw error
      }
      Sys.close(fd)
      fd = next
    }
    return fd
  }

  /// Purges on request (the control channel's `purge`) or in the background (the
  /// maintenance queue); never called on a request thread.
  /// - Returns: files and bytes purged.
  /// - Parameter progress: hears how far a large purge has got (from the threads doing it).
  public func purge(_ request: PurgeRequest, progress: PurgeProgress? = nil) -> (files: Int, bytes: Int64) {
    let plan = storage.plan(reason: request.reason) { catalog, _ in
      switch request {
      case .bytes(let bytes): catalog.chooseVictims(toFree: bytes)
      case .domain(let domain): catalog.victims(inDomain: domain)
      case .olderThan(let seconds, let domain):
        catalog.victims(olderThan: Self.cutoff(age: seconds), domain: domain)
      case .watermark(let bytes): catalog.chooseVictims(toFree: bytes)
      }
    }
    let purged = carryOut(plan, onRequestThread: false, progress: progress)
    events.flush()  // when `appbox purge` returns, its events are in the log
    return (purged.count, purged.reduce(0) { $0 + $1.bytes })
  }

  /// The last-use time before which a file is older than `age` seconds, for any age
  /// (however large, or NaN: then nothing is that old).
  static func cutoff(age: Double) -> UInt32 {
    let cutoff = Clock.unix() - age
    return cutoff > 0 ? UInt32(min(cutoff, Double(UInt32.max))) : 0
  }

  /// Starts the background work: lock transitions, the water-mark purger, tmp's age limit.
  func startMaintenance() {
    scheduleLockTransition()
    if storage.waterMarks != nil || options.tmpMaxAge != nil {
      schedulePeriodicPurge()
    }
  }

  /// Every second: purge down to the low water mark when above the high one, and purge
  /// tmp entries older than the age limit.
  private func schedulePeriodicPurge() {
    maintenance.asyncAfter(deadline: .now() + .seconds(1)) { [weak self] in
      guard let self else { return }
      let need = storage.backgroundPurgeNeed
      if need > 0 { _ = purge(.watermark(need)) }
      if let age = options.tmpMaxAge { _ = purge(.olderThan(seconds: age, domain: .tmp)) }
      schedulePeriodicPurge()
    }
  }
}

/// Told the files and bytes a purge has unlinked so far.
public typealias PurgeProgress = @Sendable (_ files: Int, _ bytes: Int64) -> Void

extension SandboxFilesystem {
  /// How many files a purge unlinks between two reports of its progress.
  static let purgeProgressInterval = 512
}

/// What an explicit or background purge frees.
public enum PurgeRequest: Sendable {
  /// At least this many bytes, in purge order.
  case bytes(Int64)
  /// Everything purgeable in Caches or tmp.
  case domain(StorageDomain)
  /// Files unused for longer than `seconds` (in one domain, or both).
  case olderThan(seconds: Double, domain: StorageDomain?)
  /// The background purger's bytes above the low water mark.
  case watermark(Int64)

  var reason: PurgeReason {
    switch self {
    case .bytes, .domain: .explicit
    case .olderThan: .age
    case .watermark: .watermark
    }
  }
}
