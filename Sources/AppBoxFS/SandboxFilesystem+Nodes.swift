import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Lookup, attributes, links' targets

extension SandboxFilesystem {
  /// `lookup`: +1 lookup on the found node. A missing name is a negative entry the kernel
  /// may cache (every change goes through the mount); in Caches or tmp, a miss of a name
  /// purged recently is the purge's cost to the app (``notePurgeCost(_:_:in:)``).
  /// "." and ".." come from file handles (``lookupHandle(_:)``, ``lookupParent(of:)``).
  public func lookup(_ ctx: Caller, parent: NodeID, name: FileName) throws(Errno) -> Entry {
    let dots = Self.dots(name)
    if dots.dot { return try lookupHandle(parent) }
    let directory = inodes.inode(parent)
    try checkReach(ctx, directory, "lookup")
    if dots.dotDot { return try lookupParent(of: directory) }
    try checkReach(ctx, lookingUp: name, in: directory)
    try admitNewInode(for: ctx)
    do throws(Errno) {
      return try lookupEntry(in: directory, name: name)
    } catch  where error == .noEntry {
      if directory.domain.isPurgeable { notePurgeCost(.missed, name, in: directory) }
      // No negative entry in a directory of containers: a later lookup of the name asks
      // here again (the app confinement decides every one).
      return Entry(
        node: NodeID(rawValue: 0), attributes: stat(),
        entryTimeout: isDirectoryOfContainers(directory) ? 0 : configuration.entryTimeout, attributeTimeout: 0)
    }
  }

  /// `forget`: -count lookups. A regular file about to be dropped is measured one last
  /// time, so that what the backing filesystem allocated since (say, at writeback) is
  /// charged; before the drop, since a lookup right after it makes a new node for the
  /// file, which starts from what the books then hold (its retained record's charge, see
  /// ``InodeTable/Retained/charged``). Its handle is retained. An item whose last name was
  /// removed through the mount (``Inode/unlinked``) is neither once its charge has gone
  /// back (with the name, or at its last release): its handle is stale, and nothing is
  /// left to measure.
  public func forget(_ node: NodeID, count: UInt64) {
    let dropped = inodes.forget(node, count: count) { inode, retainable in
      var status: stat?  // the measurement's, which the record needs too: one fstat for both
      if inode.isRegularFile,
        !inode.unlinked.load(ordering: .relaxed) || inode.chargedUnlinked.load(ordering: .relaxed)
      {
        status = account(inode, fd: inode.fd)
      }
      return retainable ? retainedRecord(inode, status: status) : nil
    }
    if let dropped, dropped.isRegularFile {
      do throws(Errno) { try revocation.disarm(dropped) } catch {
        internalError(.passthroughDisarm, error, "cannot take the passthrough mark off a forgotten file")
      }
    }
  }

  /// `getattr`. A purged file is ESTALE: the kernel then looks its name up again (a
  /// `stat` or an open's permission check retries, and finds the name gone or new).
  ///
  /// With a handle through the writeback cache of a file whose writes are gated
  /// (``Inode/writesGated``), this is the kernel about to read or write through that
  /// handle: refused (EPERM, counted and logged) while the file's class refuses handle
  /// I/O, as the read or write would be.
  public func getattr(_ ctx: Caller, node: NodeID, handle: FileHandle?) throws(Errno) -> stat {
    let inode = inodes.inode(node)
    if isPurged(inode) { throw .stale }
    if let handle, HandleKind(handle: handle) == .writeback, inode.writesGated.load(ordering: .acquiring) {
      try check(.handleIO, inode)
    }
    return try Sys.fstat(inode.fd)
  }

  /// The kernel keeps no attributes of a file whose writes are gated: it must ask before
  /// each write through the cache.
  public func cachesAttributes(of node: NodeID) -> Bool {
    node == .root || !inodes.inode(node).writesGated.load(ordering: .acquiring)
  }

  /// `setattr`: mode, owner, size, times (incl. `UTIME_NOW`; unset ones are `UTIME_OMIT`).
  public func setattr(
    _ ctx: Caller, node: NodeID, attributes: stat, fields: SetAttributes, handle: FileHandle?
  ) throws(Errno) -> stat {
    let inode = inodes.inode(node)
    if handle == nil { try checkReach(ctx, inode, "setattr") }
    try checkChangeable(inode)
    let openFD = handle.map { Int32(truncatingIfNeeded: $0.rawValue) }
    if fields.contains(.mode) {
      if let openFD { try Sys.fchmod(openFD, attributes.st_mode) } else { try Sys.chmod(inode.fd, attributes.st_mode) }
    }
    if fields.contains(.uid) || fields.contains(.gid) {
      let uid = fields.contains(.uid) ? attributes.st_uid : uid_t.max
      let gid = fields.contains(.gid) ? attributes.st_gid : gid_t.max
      try Sys.chown(inode.fd, uid, gid)
    }
    if fields.contains(.size), inode.isRegularFile { try check(openFD == nil ? .openExisting : .handleIO, inode) }
    // Before the truncate, as the kernel does (see clearSetID).
    if fields.contains(.killSetID), !inode.isDirectory { try clearSetID(for: ctx, fd: inode.fd) }
    if fields.contains(.size) { try resize(inode, openFD: openFD, to: attributes.st_size) }
    if !fields.isDisjoint(with: [.atime, .mtime, .atimeNow, .mtimeNow]) {
      let omit = timespec(tv_sec: 0, tv_nsec: Linux.utimeOmit)
      let now = timespec(tv_sec: 0, tv_nsec: Linux.utimeNow)
      let atime = fields.contains(.atimeNow) ? now : fields.contains(.atime) ? attributes.st_atim : omit
      let mtime = fields.contains(.mtimeNow) ? now : fields.contains(.mtime) ? attributes.st_mtim : omit
      if let openFD {
        try Sys.futimens(openFD, (atime, mtime))
      } else {
        try Sys.utimens(inode.fd, isSymlink: inode.isSymlink, (atime, mtime))
      }
    }
    return try Sys.fstat(inode.fd)
  }

  /// `readlink`.
  public func readlink(_ ctx: Caller, node: NodeID) throws(Errno) -> [UInt8] {
    let inode = inodes.inode(node)
    try checkReach(ctx, inode, "readlink")
    return try Sys.readlink(inode.fd)
  }

  /// `access`: checked with the caller's filesystem credentials (`AT_EACCESS` uses them).
  public func access(_ ctx: Caller, node: NodeID, mask: Int32) throws(Errno) {
    let inode = inodes.inode(node)
    try checkReach(ctx, inode, "access")
    let fd = inode.fd
    try ctx.asCaller { () throws(Errno) in try Sys.access(fd, mask) }
  }

  /// `statfs`: the sandbox's capacity and free bytes (what `df` and
  /// `volumeAvailableCapacity` show); file counts from the backing filesystem.
  public func statfs(_ ctx: Caller, node: NodeID) throws(Errno) -> statvfs {
    var st = try Sys.fstatvfs(inodes.root.fd)
    let (capacity, free) = storage.books.withLock { ($0.ledger.capacity, $0.ledger.free) }
    let block = AllocationBlocks.size
    st.f_bsize = UInt(block)
    st.f_frsize = UInt(block)
    st.f_blocks = fsblkcnt_t(capacity / block)
    st.f_bfree = fsblkcnt_t(free / block)
    st.f_bavail = fsblkcnt_t(free / block)
    return st
  }
}
