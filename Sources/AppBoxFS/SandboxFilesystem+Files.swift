import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Open files and their I/O
//
// A file handle is the backing descriptor (low 32 bits) and how the kernel does I/O on it
// (``HandleKind``, the bits above). O_DIRECT is taken off the backing open (the kernel's
// buffers for FUSE are not aligned as the backing file would need) and honoured on the
// mount instead: the handle bypasses the kernel's page cache.
//
// Passthrough: a read-only open of a file whose class can never refuse handle I/O from
// now on (B, C after the first unlock, D) is served by the kernel straight from the
// backing file, when the kernel and the daemon's privileges allow it. Reads then cost no
// round trip and need no check. Should the file's class change to one that closes (A or
// CX) while it is open, ``PassthroughRevocation`` refuses them once that class closes.
// The kernel requires every handle opened on the file while one is open that way to be
// passthrough too: a writer that opens it meanwhile gets a passthrough handle marked
// FOPEN_DIRECT_IO, which the kernel honours first: its reads and writes still come to the
// daemon, which clears set-ID bits (under FUSE_HANDLE_KILLPRIV_V2 the kernel leaves that
// to the daemon, even for writes it passes through itself) and charges the quota write by
// write. Its shared mappings alone write the backing file directly, and find no hole to
// fill there (SandboxFilesystem+Holes.swift).
//
// Under the kernel's writeback cache (`--write-cache`; the kernel then allows no
// passthrough) a writer's handle goes through the cache (``HandleKind/writeback``):
// writes stay in the kernel and come as whole pages when it writes them back, at the
// latest when the file is closed or synced. A writer gets such a handle only when its
// writes could never be refused later (the class rule above) and the sandbox has room for
// everything the kernel may hold unwritten (``WriteCache/dirtyLimit``); any other writer
// gets FOPEN_DIRECT_IO, so that each of its writes is decided when it is made, as without
// the cache. See docs/architecture.md, "Small writes".

/// How the kernel does I/O on an open handle.
enum HandleKind: UInt64 {
  /// O_DIRECT: every read and write comes to the daemon, nothing is cached.
  case direct = 0
  /// Through the kernel's page cache; reads that miss and every write come to the daemon.
  case cached = 1
  /// Served by the kernel from a registered backing file.
  case passthrough = 2
  /// A writer's handle through the kernel's writeback cache: writes come when the kernel
  /// writes them back (``WriteOrigin/writeback``), reads that miss come as for `cached`.
  case writeback = 3

  /// `handle`'s kind.
  init(handle: FileHandle) { self = HandleKind(rawValue: handle.rawValue >> 32) ?? .direct }

  /// The handle for backing descriptor `fd`.
  func handle(_ fd: Int32) -> FileHandle { FileHandle(rawValue: UInt64(UInt32(bitPattern: fd)) | rawValue << 32) }
}

extension SandboxFilesystem {
  /// Flags for opening the backing file on behalf of a program. Under the writeback cache
  /// the kernel places every write itself (an append at the size it knows, which is ahead
  /// of the backing file's while pages are unwritten) and may read through any handle of a
  /// file to fill a page partly written: `O_APPEND` is dropped, and a write-only open is
  /// made read-write (``openBacking(_:)`` falls back to write-only, direct, where the
  /// daemon may not read the file).
  func backingFlags(_ flags: Int32) -> Int32 {
    var backing = (flags & ~(O_CREAT | O_EXCL | O_NOCTTY | Linux.openDirect)) | O_CLOEXEC | accessTimeFlag
    if driver.writeCache != nil {
      backing &= ~O_APPEND
      if backing & O_ACCMODE == O_WRONLY { backing = backing & ~O_ACCMODE | O_RDWR }
    }
    return backing
  }

  /// Opens a backing file with ``backingFlags(_:)`` by `open` (given those flags). Where the
  /// writeback cache made a write-only open read-write and the backing filesystem refuses
  /// that (EACCES: a daemon that is not root, a file it may only write), the file is
  /// opened write-only.
  /// - Returns: the descriptor, and whether the kernel must not cache this handle's writes
  ///   (it could not fill partial pages through it).
  func openBacking(flags: Int32, _ open: (Int32) throws(Errno) -> Int32) throws(Errno) -> (fd: Int32, uncached: Bool) {
    let backing = backingFlags(flags)
    do throws(Errno) {
      return (try open(backing), false)
    } catch  where error == .accessDenied && flags & O_ACCMODE == O_WRONLY && backing & O_ACCMODE == O_RDWR {
      return (try open(backing & ~O_ACCMODE | O_WRONLY), true)
    }
  }

  /// `O_NOATIME` on a `-o noatime` mount: the daemon's reads of backing files and
  /// directories must not change their access times.
  var accessTimeFlag: Int32 { options.noAccessTime ? Linux.openNoAccessTime : 0 }

  /// The reply for a new handle on a regular file, counted in the inode's ``IOMode``.
  ///
  /// `noFlush`: a close on the mount sends no FLUSH request (one round trip less per
  /// close: create, untar, git). Safe because the backing filesystem is local (its close
  /// reports nothing that `release` or `fsync` would not), there is no writeback cache to
  /// write out, and POSIX locks are kept by the kernel (no getlk/setlk handlers), so no
  /// lock owner needs the flush to drop its locks.
  func opened(_ fd: Int32, flags: Int32, inode: Inode, uncached: Bool = false) -> OpenedFile {
    // O_TRUNC came with the open (the kernel sends no truncate of its own): what it freed
    // leaves the books now. A new file (nothing allocated) needs no measuring.
    if flags & O_TRUNC != 0, inode.allocated.withLock({ $0 }) > 0 { account(inode, fd: fd) }
    let direct = flags & Linux.openDirect != 0
    let writer = flags & O_ACCMODE != O_RDONLY
    let readClass = inode.isRegularFile && !direct && !writer ? protectionClass(of: inode) : nil  // outside the lock
    let mayPassthrough =
      passthrough.isAvailable && readClass.map { AccessRule.handleIOStaysAllowed($0, in: protection.snapshot) } ?? false
    let writeCache = inode.isRegularFile && writer && !direct ? driver.writeCache : nil
    let roomForWriteBack = writeCache.map { !uncached && hasRoom(forWriteBack: $0) } ?? false
    let loaded = writeCache == nil ? nil : protectionClass(of: inode)  // reads it now, outside the lock
    let (kind, backing) = inode.ioMode.withLock { mode -> (HandleKind, BackingID?) in
      if let loaded {
        // Decided under this lock, which a change of class takes to see the writers
        // (``gateWrites(of:)``): a writer sees either the new class or is seen.
        mode.cachedHandles += 1
        guard roomForWriteBack,
          AccessRule.handleIOStaysAllowed(inode.cachedProtection ?? loaded, in: protection.snapshot)
        else { return (.direct, nil) }
        mode.cachedWriters += 1
        writebackWriters.add(1, ordering: .relaxed)
        return (.writeback, nil)
      }
      if let backing = mode.backing {
        mode.passthroughHandles += 1
        // A read-write handle may map the backing file (``WriteMappedFiles``).
        if flags & O_ACCMODE == O_RDWR { writeMapped.add(inode.key) }
        return (.passthrough, backing)
      }
      // Only a file without holes: a writer that joins may fill them through a mapping
      // the daemon never sees (``changingExtent(_:_:)``). The class and the lock state are
      // looked at again under this lock, which a change of class (``reclassified``) and a
      // lock's sweep (``guardPassthroughReads(of:closed:)``) take to find registered
      // backing files: either they find this one and refuse it, or this sees the new
      // class or state (a file made class A and the device locked since the check above
      // would otherwise be read past every refusal).
      if mayPassthrough, let readClass, mode.cachedHandles == 0, mode.holesInMaking == 0,
        AccessRule.handleIOStaysAllowed(inode.cachedProtection ?? readClass, in: protection.snapshot),
        !mayHaveHoles(fd), let backing = registerBacking(inode, fd: fd)
      {
        mode.backing = backing
        mode.passthroughHandles = 1
        passthroughFiles.add(1, ordering: .relaxed)
        return (.passthrough, backing)
      }
      // A direct handle counts as a cached one: the kernel puts the file in caching mode
      // when it is mapped (FUSE_DIRECT_IO_ALLOW_MMAP), and refuses passthrough then.
      // A write-only handle is direct too: it can neither read nor map, so the page cache
      // would only hold a copy of what it writes, made on the way (one copy of every
      // byte more than a direct write; docs/architecture.md).
      mode.cachedHandles += 1
      return (direct || flags & O_ACCMODE == O_WRONLY ? .direct : .cached, nil)
    }
    // A handle joining passthrough handles must be one too (the kernel refuses to mix),
    // but a writer's, or an O_DIRECT one's, with FOPEN_DIRECT_IO, which the kernel puts
    // first: its I/O comes to the daemon, its checks and its quota (a writer's shared
    // mmaps alone go to the backing file, which has no holes for them to fill). A plain
    // passthrough handle would also hand the caller's O_DIRECT to the backing file, and
    // ext4 refuses unaligned direct I/O (EINVAL).
    let throughDaemon = kind == .passthrough && (writer || direct)
    return OpenedFile(
      handle: kind.handle(fd), keepCache: kind == .cached || kind == .writeback,
      directIO: kind == .direct || throughDaemon, noFlush: true, backing: backing)
  }

  /// After a change of `inode`'s class: writers that hold handles through the writeback
  /// cache keep them (the kernel cannot take a handle back), so if the new class can
  /// refuse handle I/O, their writes are gated (``Inode/writesGated``), and the kernel's
  /// attributes of the file are dropped so that it asks before its next write; if it
  /// cannot, the gate opens again. The writers are counted under `ioMode`'s lock, which
  /// ``opened(_:flags:inode:uncached:)`` holds while it decides on the class it reads
  /// there. Invalidating attributes alone takes no lock the kernel holds for the request
  /// that changed the class, so this may run on its thread.
  func gateWrites(of inode: Inode) {
    guard let current = inode.cachedProtection else { return }
    let refusable = !AccessRule.handleIOStaysAllowed(current, in: protection.snapshot)
    let closing = inode.ioMode.withLock { mode -> Bool in
      let gated = refusable && mode.cachedWriters > 0
      return !inode.writesGated.exchange(gated, ordering: .acquiringAndReleasing) && gated
    }
    if closing { notifier.withLock { $0 }?.invalidateInode(inodes.node(inode), offset: -1, length: 0) }
  }

  /// Has the kernel write back what it holds unwritten of every file with a writer through
  /// its writeback cache (`appbox backup`, which reads the backing directory, asks first):
  /// an invalidation of a file's pages writes its dirty pages back before it returns
  /// (the kernel launders each dirty page, a write the daemon's other threads serve),
  /// which `syncfs(2)` does not wait for on a FUSE mount. The kernel drops the files'
  /// clean pages too. Runs on a control thread, never on a request thread.
  /// - Returns: how many files were written back.
  public func writeBackCachedWrites() -> Int {
    guard driver.writeCache != nil, let notifier = notifier.withLock({ $0 }) else { return 0 }
    var files = 0
    for inode in inodes.snapshot() where inode.isRegularFile && inode.ioMode.withLock({ $0.cachedWriters > 0 }) {
      notifier.invalidateInode(inodes.node(inode))
      files += 1
    }
    return files
  }

  /// Whether the sandbox has room for everything the kernel may hold unwritten for the
  /// mount (so a write-back of pages written now finds its bytes free, unless the
  /// writers go on writing once the sandbox has filled up).
  func hasRoom(forWriteBack writeCache: WriteCache) -> Bool {
    storage.books.withLock { $0.ledger.free } >= writeCache.dirtyLimit
  }

  /// Registers `inode`'s backing file for passthrough, read-write when the daemon can open
  /// it so (a writer may join later), else through the read-only handle `fd`; armed
  /// first, so that its reads can be refused should its class close. Nil when either
  /// cannot be done.
  private func registerBacking(_ inode: Inode, fd: Int32) -> BackingID? {
    guard arm(inode) else { return nil }
    // Absent is the meaning: a file the daemon cannot open read-write (mode, a read-only
    // backing) is registered through the reader's handle instead.
    let writable = try? Sys.reopen(inode.fd, flags: O_RDWR | O_CLOEXEC | accessTimeFlag)
    defer { writable.map(Sys.close) }
    return passthrough.register(writable ?? fd)
  }

  /// Arms `inode` for revocable passthrough (``PassthroughRevocation``): false when it
  /// cannot be, and then it is not opened for passthrough (its reads go through the
  /// daemon, which checks each); a failed mark is logged and counted.
  func arm(_ inode: Inode) -> Bool {
    do throws(Errno) { return try revocation.arm(inode) } catch {
      internalError(
        .passthroughArm, error,
        "cannot arm \(String(decoding: mountPath(of: inode), as: UTF8.self)) for passthrough; its reads go through the daemon"
      )
      return false
    }
  }

  /// Refuses the reads that the kernel serves itself (passthrough) of `inode` when its
  /// class is `closed` and such handles are open, or allows them again. A failure is
  /// logged and counted (see ``PassthroughRevocation/update(_:closed:)``).
  func guardPassthroughReads(of inode: Inode, closed: Bool) {
    if closed, inode.ioMode.withLock({ $0.backing == nil }) { return }
    updateRevocation(of: inode, closed: closed)
  }

  /// ``PassthroughRevocation/update(_:closed:)``, its failure logged and counted.
  func updateRevocation(of inode: Inode, closed: Bool) {
    do throws(Errno) { try revocation.update(inode, closed: closed) } catch {
      let path = String(decoding: mountPath(of: inode), as: UTF8.self)
      if closed {
        internalError(
          .passthroughRefuse, error,
          "cannot refuse the passthrough reads of \(path), whose class closed; tried again at the next change of state")
      } else {
        internalError(.passthroughAllow, error, "cannot let the passthrough reads of \(path) skip the daemon again")
      }
    }
  }

  /// Takes a released handle out of the inode's ``IOMode``; the last passthrough handle
  /// drops the backing file's registration.
  private func closed(_ handle: FileHandle, inode: Inode) {
    let unregister = inode.ioMode.withLock { mode -> BackingID? in
      switch HandleKind(handle: handle) {
      case .direct, .cached:
        mode.cachedHandles -= 1
        return nil
      case .writeback:
        mode.cachedHandles -= 1
        mode.cachedWriters -= 1
        writebackWriters.subtract(1, ordering: .relaxed)
        if mode.cachedWriters == 0 { inode.writesGated.store(false, ordering: .relaxed) }
        return nil
      case .passthrough:
        mode.passthroughHandles -= 1
        guard mode.passthroughHandles == 0 else { return nil }
        defer { mode.backing = nil }
        return mode.backing
      }
    }
    if let unregister {
      passthrough.unregister(unregister)
      updateRevocation(of: inode, closed: false)
      passthroughFiles.subtract(1, ordering: .relaxed)
    }
  }

  /// `open`: refused (EPERM) when the file's class is closed in the current state. The
  /// file is pinned against purges before this returns (ESTALE if it was purged since
  /// the kernel looked it up: the kernel looks the name up again and retries).
  public func open(_ ctx: Caller, node: NodeID, flags: Int32) throws(Errno) -> OpenedFile {
    let inode = inodes.inode(node)
    try checkReach(ctx, inode, "open")
    if flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0 { try checkChangeable(inode) }
    if inode.isRegularFile { try check(.openExisting, inode) }
    try admitNewHandle(for: ctx)
    try pin(inode)
    if inode.domain == .caches, inode.isRegularFile, flags & O_ACCMODE == O_RDONLY {
      purgeCost.cacheOpens.add(1, ordering: .relaxed)  // a hit: the app reads what it cached
    }
    let fd: Int32
    let uncached: Bool
    do throws(Errno) {
      if flags & O_TRUNC != 0, inode.isRegularFile { try clearSetID(for: ctx, fd: inode.fd) }
      (fd, uncached) = try withDescriptors { () throws(Errno) -> (Int32, Bool) in
        try openBacking(flags: flags) { (backing) throws(Errno) in try Sys.reopen(inode.fd, flags: backing) }
      }
    } catch {
      unpin(inode)
      throw error
    }
    if flags & O_TRUNC != 0 { account(inode, fd: fd) }  // the truncate gave blocks back
    openHandles.add(1, ordering: .relaxed)
    return opened(fd, flags: flags, inode: inode, uncached: uncached)
  }

  /// `create`: +1 lookup. The kernel sends it for `O_CREAT` opens of names it has not
  /// looked up, so the name may exist: then this is an open of the existing file.
  /// A new file belongs to the caller and takes its directory's class; creating is
  /// refused (EPERM) when that class forbids it now.
  public func create(_ ctx: Caller, parent: NodeID, name: FileName, mode: mode_t, flags: Int32)
    throws(Errno) -> (Entry, OpenedFile)
  {
    let directory = inodes.inode(parent)
    try checkReach(ctx, directory, "create")
    try admitNewInode(for: ctx)
    try admitNewHandle(for: ctx)
    let exclusive = flags & O_EXCL != 0
    let inherited = protectionClass(of: directory)
    // A name that a purge removes between the attempts below is created afresh.
    var attempts = 0
    while true {
      attempts += 1
      do throws(Errno) {
        try checkCanCreate(in: directory)
        if !exclusive, !AccessRule.decide(inherited, .createNew, in: protection.snapshot) {
          throw Errno.exists  // refused if new: see first whether it exists (below)
        }
        try check(.createNew, inherited, path: mountPath(of: name, in: directory), in: directory.container)
        let room = try reserveRoom(in: directory)
        let fd = try withDescriptors { () throws(Errno) -> Int32 in
          try ctx.asCreator(mode: mode) { (mode) throws(Errno) -> Int32 in
            try Sys.openat(directory.fd, name.cString, backingFlags(flags) | O_CREAT | O_EXCL | O_NOFOLLOW, mode)
          }
        }
        let entry: Entry
        do throws(Errno) {
          entry = try created(
            name, in: directory, protection: inherited, reserved: reserve(0, area: directory.area), room: room,
            openFD: fd)
        } catch {
          Sys.close(fd)
          throw error
        }
        openHandles.add(1, ordering: .relaxed)
        return (entry, opened(fd, flags: flags, inode: inodes.inode(entry.node)))
      } catch  where !exclusive && (error == .exists || error == .notPermitted || error == .noSpace) {
        // The name exists (or creating it would be refused, or not fit): open it if it does.
        let entry: Entry
        do throws(Errno) { entry = try lookupEntry(in: directory, name: name) } catch let missing {
          if missing == .noEntry, error == .exists, attempts < 16 { continue }  // gone meanwhile
          if error == .exists {
            try check(.createNew, inherited, path: mountPath(of: name, in: directory), in: directory.container)
          }
          throw error
        }
        do throws(Errno) {
          return (entry, try open(ctx, node: entry.node, flags: flags & ~O_CREAT))
        } catch {
          forget(entry.node, count: 1)
          if error == .stale, attempts < 16 { continue }  // purged meanwhile
          throw error
        }
      }
    }
  }

  /// `read`: replies straight from the backing descriptor. Before the first one that may
  /// fill the kernel's page cache, the file is marked as having cached pages (sequentially
  /// consistent: a direct write that reads the mark after its backing write sees it if
  /// this read's backing read came first, see ``write(_:node:handle:data:offset:)``).
  public func read(_ ctx: Caller, node: NodeID, handle: FileHandle, count: Int, offset: off_t) throws(Errno)
    -> ReadData
  {
    let inode = inodes.inode(node)
    try check(.handleIO, inode)
    if HandleKind(handle: handle) != .passthrough, !inode.mayHaveCachedPages.load(ordering: .relaxed) {
      inode.mayHaveCachedPages.store(true, ordering: .sequentiallyConsistent)
    }
    touch(inode)
    if inode.domain == .caches { purgeCost.cacheReads.add(1, ordering: .relaxed) }
    return .file(fd: Int32(truncatingIfNeeded: handle.rawValue), offset: offset, count: count)
  }

  /// `write_buf`: within the quota (purging tmp and Caches first if needed); a write that
  /// only partly fits is shortened, one that does not fit at all is ENOSPC.
  ///
  /// A direct write (`O_DIRECT`) reaches the daemon after the kernel has dropped the
  /// cached pages of its range; a buffered reader may fill them again, with what the
  /// backing file held before this write, in between. For an asynchronous write the kernel
  /// drops nothing after it completes, and the reader's next `read` would be served those
  /// old bytes. So the reply names the written range as stale pages, which the driver drops
  /// before replying, when the file's page cache may hold pages at all
  /// (``Inode/mayHaveCachedPages``). Handles that join passthrough are left out: while a
  /// file is open that way the kernel caches none of its pages.
  public func write(_ ctx: Caller, node: NodeID, handle: FileHandle, data: some WriteData, offset: off_t) throws(Errno)
    -> Written
  {
    let inode = inodes.inode(node)
    let fd = Int32(truncatingIfNeeded: handle.rawValue)
    let count = data.count
    if data.origin != .writeback {
      try check(.handleIO, inode)
      try clearSetID(for: ctx, fd: fd)
    }
    let written = try writingAt(inode, fd: fd, offset: offset) { () throws(Errno) -> Int in
      var limit: Int?
      let reservation: Reservation
      if data.origin == .writeback {
        // The kernel writing back pages written earlier (under its writeback cache, or of a
        // shared mapping): their writes were checked then, if at all, so the lock is checked
        // here unless a lock transition is having them written back before it takes
        // effect (``Inode/flushingForLock``). Set-ID bits were dealt with by the writes
        // themselves (the kernel does not cache writes to such files). The kernel takes no
        // partial write-back: all of it fits or it is ENOSPC, which fsync and close report.
        if !inode.flushingForLock.load(ordering: .acquiring) { try check(.handleIO, inode) }
        reservation = try reserveAll(growthEstimate(inode, offset: offset, count: count), area: inode.area)
      } else {
        reservation = try reserveForWrite(inode, offset: offset, count: count, limit: &limit)
      }
      let written: Int
      do throws(Errno) { written = try data.write(to: fd, at: offset, limit: limit) } catch {
        settle(reservation, inode, fd: fd)  // a failed write may still have allocated
        throw error
      }
      inode.written.store(true, ordering: .relaxed)
      settle(reservation, inode, fd: fd)
      return written
    }
    touch(inode)
    let kind = HandleKind(handle: handle)
    let direct = data.origin == .direct || (data.origin == .buffered && kind == .direct)
    guard direct, kind != .passthrough, written > 0, inode.mayHaveCachedPages.load(ordering: .sequentiallyConsistent)
    else { return Written(count: written) }
    return Written(count: written, stalePages: Int64(offset)..<Int64(offset) + Int64(written))
  }

  /// Before `ctx` changes a file's data (write, truncate, `O_TRUNC` open, fallocate,
  /// copy_file_range): clears set-user-ID, and set-group-ID when group-executable or when
  /// the caller is not in the file's group, as the kernel does for a caller without
  /// CAP_FSETID (here: not uid 0). The daemon makes those changes as root, which the
  /// backing filesystem exempts, and under FUSE_HANDLE_KILLPRIV_V2 the kernel leaves it to
  /// us. Before the change, as the kernel does, so that no program runs the changed file
  /// with the bits still set; the kernel holds the file's lock across the request, so no
  /// chmod on the mount comes in between. The kernel does not cache such a file's
  /// attributes (`FuseConfiguration.attributeTimeout(for:)`): the mount shows the new mode
  /// at once. `fd` is any descriptor of the file, an `O_PATH` one included.
  /// - Throws: the `fstat`'s or `chmod`'s error (then nothing is changed).
  @inline(__always)
  func clearSetID(for ctx: Caller, fd: Int32) throws(Errno) {
    guard ctx.uid != 0 else { return }
    let st = try Sys.fstat(fd)
    guard st.st_mode & (S_ISUID | S_ISGID) != 0 else { return }
    let mode = st.st_mode & 0o7777
    var cleared = mode & ~S_ISUID
    if mode & S_ISGID != 0, mode & S_IXGRP != 0 || !ctx.isInGroup(st.st_gid) { cleared &= ~S_ISGID }
    if cleared != mode { try Sys.chmod(fd, cleared) }
  }

  /// Reserves room for `count` bytes at `offset`; `limit` becomes a shorter length when
  /// only part fits.
  /// - Throws: ENOSPC when nothing fits.
  func reserveForWrite(_ inode: Inode, offset: off_t, count: Int, limit: inout Int?) throws(Errno) -> Reservation {
    let need = growthEstimate(inode, offset: offset, count: count)
    let reservation = reserve(need, area: inode.area)
    if reservation.bytes >= need { return reservation }
    // Keep one block of the grant for the filesystem's metadata; write what fits in the rest.
    let fits = Int(AllocationBlocks.roundDown(reservation.bytes - AllocationBlocks.size))
    guard fits > 0 else {
      reservation.cancel()
      storage.countNoSpace()
      throw .noSpace
    }
    limit = min(fits, count)
    return reservation
  }

  /// `flush`: a close of one descriptor. Closing a duplicate makes the backing filesystem
  /// see the close too (what network filesystems report errors on).
  public func flush(_ ctx: Caller, node: NodeID, handle: FileHandle) throws(Errno) {
    let fd = try Sys.dup(Int32(truncatingIfNeeded: handle.rawValue))
    Sys.close(fd)
  }

  /// `release`: the last close.
  public func release(_ ctx: Caller, node: NodeID, handle: FileHandle) {
    let inode = inodes.inode(node)
    let fd = Int32(truncatingIfNeeded: handle.rawValue)
    openHandles.subtract(1, ordering: .relaxed)
    closed(handle, inode: inode)
    // What the backing filesystem allocates at writeback: measured while written data may
    // be pending (the last handle's release clears the mark), and after passthrough
    // handles, whose writes bypass the daemon. A file nobody wrote is not measured again.
    let last = inode.openHandles.load(ordering: .relaxed) <= 1
    let written = last ? inode.written.exchange(false, ordering: .relaxed) : inode.written.load(ordering: .relaxed)
    if written, inode.mayReshapeAtWriteBack.load(ordering: .relaxed) { writeBack(inode, fd: fd) }
    Sys.close(fd)
    if written || HandleKind(handle: handle) == .passthrough { account(inode, fd: inode.fd) }
    if last, inode.recreatesPurged.load(ordering: .relaxed) { countWrittenAgain(inode) }
    unpin(inode)
    // An unlinked file kept its charge while open: what it was charged goes back once no
    // handle is left (measured again: another may have been opened meanwhile).
    if inode.chargedUnlinked.load(ordering: .relaxed) { account(inode, fd: inode.fd) }
  }

  /// Writes a written file's dirty backing pages back and waits for that I/O, so that
  /// what the backing filesystem allocates or frees for them then is done when the release
  /// measures the file: with ext4's delayed allocation, a fragmented file's extent-tree
  /// block is allocated at write-back, and freed again when the unwritten extents that
  /// write-back made are converted at the I/O's end and merge back into the inode. Left
  /// to the kernel's flusher, that comes seconds later, after the last measurement, and
  /// the books miss it (docs/architecture.md, Quota). Only for files that had holes or
  /// were fallocated (``Inode/mayReshapeAtWriteBack``). A failure is logged and counted:
  /// what the write-back changes is then charged at the file's next measurement.
  private func writeBack(_ inode: Inode, fd: Int32) {
    guard inode.isRegularFile else { return }
    driver.handOff()  // it waits for the disk
    do throws(Errno) { try Sys.writeBack(fd) } catch {
      internalError(
        .writeback, error,
        "cannot write \(String(decoding: mountPath(of: inode), as: UTF8.self)) back at its release; what that allocates is charged at its next measurement"
      )
    }
  }

  /// `fsync`.
  public func fsync(_ ctx: Caller, node: NodeID, handle: FileHandle, dataOnly: Bool) throws(Errno) {
    try Sys.fsync(Int32(truncatingIfNeeded: handle.rawValue), dataOnly: dataOnly)
    account(inodes.inode(node), fd: Int32(truncatingIfNeeded: handle.rawValue))  // writeback allocates metadata
  }

  /// `fallocate`, including `FALLOC_FL_PUNCH_HOLE` and `FALLOC_FL_KEEP_SIZE`; allocating
  /// is within the quota (all or nothing: ENOSPC). Every mode clears set-ID bits, as
  /// local filesystems do. A file that must have no holes below its end
  /// (``keepsHolesFilled(_:_:)``) gets none: see
  /// ``holeFreeAllocation(_:fd:mode:offset:fill:)``.
  public func fallocate(_ ctx: Caller, node: NodeID, handle: FileHandle, mode: Int32, offset: off_t, length: off_t)
    throws(Errno)
  {
    let inode = inodes.inode(node)
    try check(.handleIO, inode)
    let fd = Int32(truncatingIfNeeded: handle.rawValue)
    try clearSetID(for: ctx, fd: fd)
    inode.mayReshapeAtWriteBack.store(true, ordering: .relaxed)  // unwritten extents, or holes
    if mayLeaveHoles(inode, mode: mode, offset: offset) {
      try changingExtent(inode) { (fill) throws(Errno) in
        let mode = try holeFreeAllocation(inode, fd: fd, mode: mode, offset: offset, fill: fill)
        try allocate(inode, fd: fd, mode: mode, offset: offset, length: length)
      }
    } else {
      try allocate(inode, fd: fd, mode: mode, offset: offset, length: length)
    }
    // Data written before, not yet written back, now lies beside unwritten extents or
    // holes: the release writes it back and measures (``writeBack(_:fd:)``).
    inode.written.store(true, ordering: .relaxed)
  }

  /// `fallocate(2)` in `mode`, within the quota: all or nothing (a punched hole reserves
  /// nothing).
  private func allocate(_ inode: Inode, fd: Int32, mode: Int32, offset: off_t, length: off_t) throws(Errno) {
    let allocates = mode & Linux.fallocPunchHole == 0
    let reservation = try reserveAll(
      allocates ? AllocationBlocks.withMetadata(Int64(length)) : 0, area: inode.area)
    do throws(Errno) { try Sys.fallocate(fd, mode, offset, length) } catch {
      settle(reservation, inode, fd: fd)  // a full backing fails after allocating part
      throw error
    }
    settle(reservation, inode, fd: fd)
  }

  /// `lseek` for `SEEK_DATA` and `SEEK_HOLE` (the kernel answers the others itself).
  public func lseek(_ ctx: Caller, node: NodeID, handle: FileHandle, offset: off_t, whence: Int32) throws(Errno)
    -> off_t
  {
    try Sys.lseek(Int32(truncatingIfNeeded: handle.rawValue), offset, whence)
  }

  /// `copy_file_range`: copied by the backing filesystem, within the quota like a write,
  /// and clearing the target's set-ID bits like one.
  public func copyFileRange(
    _ ctx: Caller, from: NodeID, handle inHandle: FileHandle, offset inOffset: off_t, to: NodeID,
    handle outHandle: FileHandle, offset outOffset: off_t, count: Int, flags: Int32
  ) throws(Errno) -> Int {
    let source = inodes.inode(from)
    let target = inodes.inode(to)
    try check(.handleIO, source)
    try check(.handleIO, target)
    let outFD = Int32(truncatingIfNeeded: outHandle.rawValue)
    try clearSetID(for: ctx, fd: outFD)
    let copied = try writingAt(target, fd: outFD, offset: outOffset) { () throws(Errno) -> Int in
      var limit: Int?
      let reservation = try reserveForWrite(target, offset: outOffset, count: count, limit: &limit)
      let copied: Int
      do throws(Errno) {
        copied = try Sys.copyFileRange(
          Int32(truncatingIfNeeded: inHandle.rawValue), inOffset, outFD, outOffset, limit ?? count,
          UInt32(bitPattern: flags))
      } catch {
        settle(reservation, target, fd: outFD)  // a failed copy may still have allocated
        throw error
      }
      target.written.store(true, ordering: .relaxed)
      settle(reservation, target, fd: outFD)
      return copied
    }
    touch(source)
    touch(target)
    return copied
  }
}
