import FuseBridge
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
// round trip and need no check. The kernel requires every handle opened on the file while
// one is open that way to be passthrough too: a writer that opens it meanwhile gets a
// passthrough handle as well, and its writes are charged to the quota when it is
// released or synced instead of one by one.

/// How the kernel does I/O on an open handle.
enum HandleKind: UInt64 {
  /// O_DIRECT: every read and write comes to the daemon, nothing is cached.
  case direct = 0
  /// Through the kernel's page cache; reads that miss and every write come to the daemon.
  case cached = 1
  /// Served by the kernel from a registered backing file.
  case passthrough = 2

  /// `handle`'s kind.
  init(handle: UInt64) { self = HandleKind(rawValue: handle >> 32) ?? .direct }

  /// The handle for backing descriptor `fd`.
  func handle(_ fd: Int32) -> UInt64 { UInt64(UInt32(bitPattern: fd)) | rawValue << 32 }
}

extension SandboxFilesystem {
  /// Flags for opening the backing file on behalf of a program.
  func backingFlags(_ flags: Int32) -> Int32 {
    (flags & ~(O_CREAT | O_EXCL | O_NOCTTY | Linux.openDirect)) | O_CLOEXEC
  }

  /// The reply for a new handle on a regular file, counted in the inode's ``IOMode``.
  ///
  /// `noFlush`: a close on the mount sends no FLUSH request (one round trip less per
  /// close: create, untar, git). Safe because the backing filesystem is local (its close
  /// reports nothing that `release` or `fsync` would not), there is no writeback cache to
  /// write out, and POSIX locks are kept by the kernel (no getlk/setlk handlers), so no
  /// lock owner needs the flush to drop its locks.
  func opened(_ fd: Int32, flags: Int32, inode: Inode) -> OpenedFile {
    // O_TRUNC came with the open (the kernel sends no truncate of its own): what it freed
    // leaves the books now. A new file (nothing allocated) needs no measuring.
    if flags & O_TRUNC != 0, inode.allocated.withLock({ $0 }) > 0 { account(inode, fd: fd) }
    let direct = flags & Linux.openDirect != 0
    let mayPassthrough =
      passthrough.isAvailable && inode.isRegularFile && !direct && flags & O_ACCMODE == O_RDONLY
      && AccessRule.handleIOStaysAllowed(protectionClass(of: inode), in: protection.snapshot)
    let (kind, backing) = inode.ioMode.withLock { mode -> (HandleKind, BackingID?) in
      if let backing = mode.backing {
        mode.passthroughHandles += 1
        return (.passthrough, backing)
      }
      if mayPassthrough, mode.cachedHandles == 0, let backing = registerBacking(inode, fd: fd) {
        mode.backing = backing
        mode.passthroughHandles = 1
        passthroughFiles.add(1, ordering: .relaxed)
        return (.passthrough, backing)
      }
      if direct { return (.direct, nil) }
      mode.cachedHandles += 1
      return (.cached, nil)
    }
    // An O_DIRECT open that joins passthrough handles must be one too (the kernel refuses
    // to mix), but with FOPEN_DIRECT_IO, which the kernel puts first: its I/O comes to the
    // daemon. A plain passthrough handle would hand the caller's O_DIRECT to the backing
    // file, and ext4 refuses unaligned direct I/O (EINVAL).
    return OpenedFile(
      handle: kind.handle(fd), keepCache: kind == .cached, directIO: kind == .direct || direct, noFlush: true,
      backing: backing)
  }

  /// Registers `inode`'s backing file for passthrough, read-write when the daemon can open
  /// it so (a writer may join later), else through the read-only handle `fd`.
  private func registerBacking(_ inode: Inode, fd: Int32) -> BackingID? {
    guard let writable = try? Sys.reopen(inode.fd, flags: O_RDWR | O_CLOEXEC) else { return passthrough.register(fd) }
    defer { Sys.close(writable) }
    return passthrough.register(writable)
  }

  /// Takes a released handle out of the inode's ``IOMode``; the last passthrough handle
  /// drops the backing file's registration.
  private func closed(_ handle: UInt64, inode: Inode) {
    let unregister = inode.ioMode.withLock { mode -> BackingID? in
      switch HandleKind(handle: handle) {
      case .direct: return nil
      case .cached:
        mode.cachedHandles -= 1
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
      passthroughFiles.subtract(1, ordering: .relaxed)
    }
  }

  /// `open`: refused (EPERM) when the file's class is closed in the current state.
  public func open(_ ctx: RequestContext, node: NodeID, flags: Int32) throws(Errno) -> OpenedFile {
    let inode = inodes.inode(node)
    if inode.purged.load(ordering: .relaxed) { throw .noEntry }
    if inode.isRegularFile { try check(.openExisting, inode) }
    let fd = try Sys.reopen(inode.fd, flags: backingFlags(flags))
    if flags & O_TRUNC != 0, ctx.uid != 0, let st = try? Sys.fstat(fd) {
      clearSetID(st, for: ctx, fd: fd)
    }
    opened(inode)
    return opened(fd, flags: flags, inode: inode)
  }

  /// Counts a new handle (an open file is never purged).
  func opened(_ inode: Inode) {
    inode.openHandles.add(1, ordering: .relaxed)
    if inode.domain.isPurgeable { storage.books.withLock { _ = $0.catalog.open(ino: inode.key.inode) } }
    touch(inode)
  }

  /// `create`: +1 lookup. The kernel sends it for `O_CREAT` opens of names it has not
  /// looked up, so the name may exist: then this is an open of the existing file.
  /// A new file belongs to the caller and takes its directory's class; creating is
  /// refused (EPERM) when that class forbids it now.
  public func create(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>, mode: mode_t, flags: Int32)
    throws(Errno) -> (Entry, OpenedFile)
  {
    let directory = inodes.inode(parent)
    let exclusive = flags & O_EXCL != 0
    let inherited = protectionClass(of: directory)
    do throws(Errno) {
      try checkCanCreate(in: directory)
      if !exclusive, !AccessRule.decide(inherited, .createNew, in: protection.snapshot) {
        throw Errno.exists  // refused if new: see first whether it exists (below)
      }
      try check(.createNew, inherited, path: mountPath(of: name, in: directory))
      let fd = try ctx.asCaller { () throws(Errno) -> Int32 in
        try Sys.openat(directory.fd, name, backingFlags(flags) | O_CREAT | O_EXCL | O_NOFOLLOW, mode)
      }
      let entry: Entry
      do throws(Errno) {
        entry = try created(name, in: directory, protection: inherited, reserved: 0, openFD: fd)
      } catch {
        Sys.close(fd)
        throw error
      }
      let inode = inodes.inode(entry.node)
      opened(inode)
      return (entry, opened(fd, flags: flags, inode: inode))
    } catch  where !exclusive && (error == .exists || error == .notPermitted) {
      // The name exists (or creating it would be refused): open it if it does.
      guard let entry = try? lookupEntry(in: directory, name: name) else {
        if error == .exists { try check(.createNew, inherited, path: mountPath(of: name, in: directory)) }
        throw error
      }
      do throws(Errno) {
        return (entry, try open(ctx, node: entry.node, flags: flags & ~O_CREAT))
      } catch {
        forget(entry.node, count: 1)
        throw error
      }
    }
  }

  /// `read`: replies straight from the backing descriptor.
  public func read(_ ctx: RequestContext, node: NodeID, handle: UInt64, count: Int, offset: off_t) throws(Errno)
    -> ReadData
  {
    let inode = inodes.inode(node)
    try check(.handleIO, inode)
    touch(inode)
    return .file(fd: Int32(truncatingIfNeeded: handle), offset: offset, count: count)
  }

  /// `write_buf`: within the quota (purging tmp and Caches first if needed); a write that
  /// only partly fits is shortened, one that does not fit at all is ENOSPC.
  public func write(_ ctx: RequestContext, node: NodeID, handle: UInt64, data: WriteData, offset: off_t) throws(Errno)
    -> Int
  {
    let inode = inodes.inode(node)
    try check(.handleIO, inode)
    let fd = Int32(truncatingIfNeeded: handle)
    let count = data.count
    let (reserved, limit) = try reserveForWrite(inode, offset: offset, count: count)
    let written: Int
    do throws(Errno) { written = try data.write(to: fd, at: offset, limit: limit) } catch {
      unreserve(reserved, domain: inode.domain)
      throw error
    }
    inode.written.store(true, ordering: .relaxed)
    if let st = account(inode, fd: fd, reserved: reserved) { clearSetID(st, for: ctx, fd: fd) }
    touch(inode)
    return written
  }

  /// Clears set-user-ID, and set-group-ID when group-executable or when the caller is not
  /// in the file's group, as the kernel does when a caller without CAP_FSETID (here: not
  /// uid 0) writes or truncates a file. The daemon writes as root, which the backing
  /// filesystem exempts, and under FUSE_HANDLE_KILLPRIV_V2 the kernel leaves it to us.
  /// `fd` is any descriptor of the file, an `O_PATH` one included.
  func clearSetID(_ st: stat, for ctx: RequestContext, fd: Int32) {
    guard ctx.uid != 0, st.st_mode & (S_ISUID | S_ISGID) != 0 else { return }
    let mode = st.st_mode & 0o7777
    var cleared = mode & ~S_ISUID
    if mode & S_ISGID != 0, mode & S_IXGRP != 0 || !ctx.isInGroup(st.st_gid) { cleared &= ~S_ISGID }
    if cleared != mode { try? Sys.chmod(fd, cleared) }
  }

  /// Reserves room for `count` bytes at `offset`.
  /// - Returns: the reservation, and a shorter length when only part fits.
  /// - Throws: ENOSPC when nothing fits.
  func reserveForWrite(_ inode: Inode, offset: off_t, count: Int) throws(Errno) -> (Int64, Int?) {
    let need = growthEstimate(inode, offset: offset, count: count)
    guard need > 0 else { return (0, nil) }
    let granted = reserve(need, domain: inode.domain)
    if granted >= need { return (granted, nil) }
    // Keep one block of the grant for the filesystem's metadata; write what fits in the rest.
    let fits = Int(max(0, granted - 4096) / 4096 * 4096)
    guard fits > 0 else {
      unreserve(granted, domain: inode.domain)
      storage.countNoSpace()
      throw .noSpace
    }
    return (granted, min(fits, count))
  }

  /// `flush`: a close of one descriptor. Closing a duplicate makes the backing filesystem
  /// see the close too (what network filesystems report errors on).
  public func flush(_ ctx: RequestContext, node: NodeID, handle: UInt64) throws(Errno) {
    let fd = try Sys.dup(Int32(truncatingIfNeeded: handle))
    Sys.close(fd)
  }

  /// `release`: the last close.
  public func release(_ ctx: RequestContext, node: NodeID, handle: UInt64) {
    let inode = inodes.inode(node)
    closed(handle, inode: inode)
    Sys.close(Int32(truncatingIfNeeded: handle))
    // What the backing filesystem allocated at writeback: measured while written data may
    // be pending (the last handle's release clears the mark), and after passthrough
    // handles, whose writes bypass the daemon. A file nobody wrote is not measured again.
    let remaining = inode.openHandles.subtract(1, ordering: .relaxed).newValue
    let written =
      remaining == 0 ? inode.written.exchange(false, ordering: .relaxed) : inode.written.load(ordering: .relaxed)
    if written || HandleKind(handle: handle) == .passthrough { account(inode, fd: inode.fd) }
    if inode.domain.isPurgeable { storage.books.withLock { _ = $0.catalog.close(ino: inode.key.inode) } }
  }

  /// `fsync`.
  public func fsync(_ ctx: RequestContext, node: NodeID, handle: UInt64, dataOnly: Bool) throws(Errno) {
    try Sys.fsync(Int32(truncatingIfNeeded: handle), dataOnly: dataOnly)
    account(inodes.inode(node), fd: Int32(truncatingIfNeeded: handle))  // writeback allocates metadata
  }

  /// `fallocate`, including `FALLOC_FL_PUNCH_HOLE` and `FALLOC_FL_KEEP_SIZE`; allocating
  /// is within the quota (all or nothing: ENOSPC).
  public func fallocate(_ ctx: RequestContext, node: NodeID, handle: UInt64, mode: Int32, offset: off_t, length: off_t)
    throws(Errno)
  {
    let inode = inodes.inode(node)
    try check(.handleIO, inode)
    let fd = Int32(truncatingIfNeeded: handle)
    let allocates = mode & Linux.fallocPunchHole == 0
    let reserved = allocates ? try reserveAll(Int64(length) + 4096, domain: inode.domain) : 0
    do throws(Errno) { try Sys.fallocate(fd, mode, offset, length) } catch {
      unreserve(reserved, domain: inode.domain)
      throw error
    }
    account(inode, fd: fd, reserved: reserved)
  }

  /// `lseek` for `SEEK_DATA` and `SEEK_HOLE` (the kernel answers the others itself).
  public func lseek(_ ctx: RequestContext, node: NodeID, handle: UInt64, offset: off_t, whence: Int32) throws(Errno)
    -> off_t
  {
    try Sys.lseek(Int32(truncatingIfNeeded: handle), offset, whence)
  }

  /// `copy_file_range`: copied by the backing filesystem, within the quota like a write.
  public func copyFileRange(
    _ ctx: RequestContext, from: NodeID, handle inHandle: UInt64, offset inOffset: off_t, to: NodeID,
    handle outHandle: UInt64, offset outOffset: off_t, count: Int, flags: Int32
  ) throws(Errno) -> Int {
    let source = inodes.inode(from)
    let target = inodes.inode(to)
    try check(.handleIO, source)
    try check(.handleIO, target)
    let outFD = Int32(truncatingIfNeeded: outHandle)
    let (reserved, limit) = try reserveForWrite(target, offset: outOffset, count: count)
    let copied: Int
    do throws(Errno) {
      copied = try Sys.copyFileRange(
        Int32(truncatingIfNeeded: inHandle), inOffset, outFD, outOffset, limit ?? count, UInt32(bitPattern: flags))
    } catch {
      unreserve(reserved, domain: target.domain)
      throw error
    }
    target.written.store(true, ordering: .relaxed)
    account(target, fd: outFD, reserved: reserved)
    touch(source)
    touch(target)
    return copied
  }
}
