import Dispatch
import FuseBridge
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Quota: reservations, accounting, purging

extension SandboxFilesystem {
  /// Bytes a write of `count` at `offset` may newly allocate: nothing when it stays within
  /// what is allocated, else the bytes past it plus one block for the filesystem's own
  /// metadata. The real change is measured afterwards (``account(_:fd:reserved:)``).
  func growthEstimate(_ inode: Inode, offset: off_t, count: Int) -> Int64 {
    let allocated = inode.allocated.withLock { $0 }
    let end = Int64(offset) + Int64(count)
    guard end > allocated else { return 0 }
    let growth = min(Int64(count), end - allocated)
    return (growth + 4095) / 4096 * 4096 + 4096
  }

  /// Takes `need` bytes from the quota for `domain`, purging tmp and Caches if they are
  /// not free.
  /// - Returns: the bytes granted, ≤ need.
  func reserve(_ need: Int64, domain: StorageDomain) -> Int64 {
    guard need > 0 else { return 0 }
    let (granted, plan) = storage.reserveOrPlan(need, domain: domain)
    if let granted { return granted }
    if let plan {
      RequestReading.handOff()  // unlinking the victims may take a while
      carryOut(plan, onRequestThread: true)
    }
    return storage.reserveFree(need, domain: domain)
  }

  /// Gives back a reservation that was not used.
  func unreserve(_ bytes: Int64, domain: StorageDomain) {
    if bytes != 0 { storage.charge(-bytes, domain: domain) }
  }

  /// Measures `inode`'s allocation after a change and settles the quota: the difference to
  /// what was charged before, minus what was reserved for the change. `known`: the file's
  /// stat taken since the change, which saves the `fstat`.
  /// - Returns: the file's attributes as measured (nil when it was off the books).
  @discardableResult
  func account(_ inode: Inode, fd: Int32, reserved: Int64 = 0, known: stat? = nil) -> stat? {
    let domain = inode.domain
    // Measured under the inode's lock, which `untrack` takes too: a close racing an
    // unlink either settles before the unlink gives the bytes back, or sees no link left.
    let measured = inode.allocated.withLock { charged -> (delta: Int64, now: Int64, st: stat)? in
      // An unlinked or purged file was taken off the books with its last name.
      guard let st = known ?? (try? Sys.fstat(fd)), st.st_nlink > 0, !inode.purged.load(ordering: .relaxed) else {
        return nil
      }
      let now = Int64(st.st_blocks) * 512
      defer { charged = now }
      return (now - charged, now, st)
    }
    guard let (delta, now, st) = measured else {
      unreserve(reserved, domain: domain)
      return nil
    }
    let tracked = domain.isPurgeable && inode.isRegularFile ? inode.key.inode : nil
    if delta != reserved || tracked != nil {
      storage.charge(delta - reserved, domain: domain, trackedFile: tracked, newBytes: now)
    }
    return st
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
    if let fixed = directory.fixed { return .root(fixed.domain) }
    return .directory(directory.key.inode)
  }

  // MARK: Purging

  /// Unlinks the victims of a plan (already taken off the books), records an event for
  /// each, and tells the kernel to forget them: before returning when `onRequestThread` is
  /// false (a control or maintenance thread: when `appbox purge` returns, no program sees
  /// a purged file any more), else from the maintenance queue (a notification must never
  /// be sent from a request thread). Directories are worked on in parallel (unlinks in
  /// different directories do not contend).
  /// - Returns: the victims unlinked.
  @discardableResult
  func carryOut(_ plan: StorageState.PurgePlan, onRequestThread: Bool) -> [PurgeCatalog.Victim] {
    var groups: [[[UInt8]]: [Int]] = [:]
    for (index, components) in plan.directories.enumerated() { groups[components, default: []].append(index) }
    let work = Array(groups)
    let removed = Mutex<[(index: Int, cached: Inode?)]>([])
    DispatchQueue.concurrentPerform(iterations: work.count) { group in
      let (components, indices) = work[group]
      guard let directoryFD = openDirectory(components) else { return }
      defer { Sys.close(directoryFD) }
      var done: [(index: Int, cached: Inode?)] = []
      for index in indices {
        let victim = plan.victims[index]
        let name = victim.name + [0]
        let unlinked = name.withUnsafeBufferPointer { buffer -> Bool in
          let cname = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
          // The name must still be the chosen inode (a rename may have replaced it), and
          // its only name (a file that gained a hard link is no longer purgeable).
          guard let st = try? Sys.fstatat(directoryFD, cname, AT_SYMLINK_NOFOLLOW), UInt64(st.st_ino) == victim.ino,
            st.st_nlink == 1
          else { return false }
          let cached = inodes.existing(backingInode: victim.ino)
          cached?.purged.store(true, ordering: .relaxed)
          guard (try? Sys.unlinkat(directoryFD, cname, 0)) != nil else {
            cached?.purged.store(false, ordering: .relaxed)
            return false
          }
          done.append((index, cached))
          return true
        }
        _ = unlinked
      }
      removed.withLock { $0 += done }
    }
    let purged = removed.withLock { $0 }.sorted { $0.index < $1.index }  // events in purge order
    guard !purged.isEmpty else { return [] }
    storage.purged(purged.map { plan.victims[$0.index] })
    let now = Clock.unix()
    let lines = purged.map { item in
      let victim = plan.victims[item.index]
      return PurgeEvent(
        time: now, path: plan.directories[item.index] + [victim.name], bytes: victim.bytes, domain: victim.domain,
        reason: plan.reason, lastUse: Double(victim.lastUse)
      ).jsonLine
    }
    events.record(lines.joined(separator: "\n"))
    let notify: @Sendable () -> Void = { [self, purged] in
      guard let notifier = notifier.withLock({ $0 }) else { return }
      for item in purged {
        let victim = plan.victims[item.index]
        guard let parentIno = victim.parent.directoryInode ?? domainRoots[victim.domain],
          let parent = inodes.existing(backingInode: parentIno)
        else { continue }
        if let child = item.cached {
          notifier.delete(parent: inodes.node(parent), child: inodes.node(child), name: victim.name)
        } else {
          notifier.invalidateEntry(parent: inodes.node(parent), name: victim.name)
        }
      }
    }
    if onRequestThread { maintenance.async(execute: notify) } else { notify() }
    return purged.map { plan.victims[$0.index] }
  }

  /// Opens a directory below the backing root by components, following no symlink.
  private func openDirectory(_ components: [[UInt8]]) -> Int32? {
    var fd = (try? Sys.dup(inodes.root.fd)) ?? -1
    for component in components where fd >= 0 {
      let name = component + [0]
      let next = name.withUnsafeBufferPointer { buffer in
        try? Sys.openat(
          fd, UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
          Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
      }
      Sys.close(fd)
      fd = next ?? -1
    }
    return fd >= 0 ? fd : nil
  }

  /// Purges on request (the control channel's `purge`) or in the background (the
  /// maintenance queue); never called on a request thread.
  /// - Returns: files and bytes purged.
  public func purge(_ request: PurgeRequest) -> (files: Int, bytes: Int64) {
    let plan = storage.plan(reason: request.reason) { catalog, _ in
      switch request {
      case .bytes(let bytes): catalog.chooseVictims(toFree: bytes)
      case .domain(let domain): catalog.victims(inDomain: domain)
      case .olderThan(let seconds, let domain):
        catalog.victims(olderThan: Self.cutoff(age: seconds), domain: domain)
      case .watermark(let bytes): catalog.chooseVictims(toFree: bytes)
      }
    }
    let purged = carryOut(plan, onRequestThread: false)
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

  var reason: PurgeEvent.Reason {
    switch self {
    case .bytes, .domain: .explicit
    case .olderThan: .age
    case .watermark: .watermark
    }
  }
}
