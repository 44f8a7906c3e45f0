import FuseBridge
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Open files and their I/O
//
// A file handle is the backing descriptor itself. O_DIRECT is taken off the backing open
// (the kernel's buffers for FUSE are not aligned as the backing file would need) and
// honoured on the mount instead: the handle bypasses the kernel's page cache.

extension SandboxFilesystem {
  /// Flags for opening the backing file on behalf of a program.
  func backingFlags(_ flags: Int32) -> Int32 {
    (flags & ~(O_CREAT | O_EXCL | O_NOCTTY | Linux.openDirect)) | O_CLOEXEC
  }

  /// The reply for a handle on a regular file.
  ///
  /// `noFlush`: a close on the mount sends no FLUSH request (one round trip less per
  /// close: create, untar, git). Safe because the backing filesystem is local (its close
  /// reports nothing that `release` or `fsync` would not), there is no writeback cache to
  /// write out, and POSIX locks are kept by the kernel (no getlk/setlk handlers), so no
  /// lock owner needs the flush to drop its locks.
  func opened(_ fd: Int32, flags: Int32) -> OpenedFile {
    let direct = flags & Linux.openDirect != 0
    return OpenedFile(handle: UInt64(UInt32(bitPattern: fd)), keepCache: !direct, directIO: direct, noFlush: true)
  }

  /// `open`.
  public func open(_ ctx: RequestContext, node: NodeID, flags: Int32) throws(Errno) -> OpenedFile {
    let inode = inodes.inode(node)
    let fd = try Sys.reopen(inode.fd, flags: backingFlags(flags))
    inode.openHandles.add(1, ordering: .relaxed)
    return opened(fd, flags: flags)
  }

  /// `create`: +1 lookup. The new file belongs to the caller.
  public func create(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>, mode: mode_t, flags: Int32)
    throws(Errno) -> (Entry, OpenedFile)
  {
    let directory = inodes.inode(parent)
    try checkCanCreate(in: directory)
    let fd = try ctx.asCaller { () throws(Errno) -> Int32 in
      try Sys.openat(directory.fd, name, backingFlags(flags) | O_CREAT | (flags & O_EXCL) | O_NOFOLLOW, mode)
    }
    let entry: Entry
    do throws(Errno) { entry = try lookupEntry(in: directory, name: name) } catch {
      Sys.close(fd)
      throw error
    }
    inodes.inode(entry.node).openHandles.add(1, ordering: .relaxed)
    return (entry, opened(fd, flags: flags))
  }

  /// `read`: replies straight from the backing descriptor.
  public func read(_ ctx: RequestContext, node: NodeID, handle: UInt64, count: Int, offset: off_t) throws(Errno)
    -> ReadData
  {
    .file(fd: Int32(truncatingIfNeeded: handle), offset: offset, count: count)
  }

  /// `write_buf`.
  public func write(_ ctx: RequestContext, node: NodeID, handle: UInt64, data: WriteData, offset: off_t) throws(Errno)
    -> Int
  {
    try data.write(to: Int32(truncatingIfNeeded: handle), at: offset)
  }

  /// `flush`: a close of one descriptor. Closing a duplicate makes the backing filesystem
  /// see the close too (what network filesystems report errors on).
  public func flush(_ ctx: RequestContext, node: NodeID, handle: UInt64) throws(Errno) {
    let fd = try Sys.dup(Int32(truncatingIfNeeded: handle))
    Sys.close(fd)
  }

  /// `release`: the last close.
  public func release(_ ctx: RequestContext, node: NodeID, handle: UInt64) {
    Sys.close(Int32(truncatingIfNeeded: handle))
    inodes.inode(node).openHandles.subtract(1, ordering: .relaxed)
  }

  /// `fsync`.
  public func fsync(_ ctx: RequestContext, node: NodeID, handle: UInt64, dataOnly: Bool) throws(Errno) {
    try Sys.fsync(Int32(truncatingIfNeeded: handle), dataOnly: dataOnly)
  }

  /// `fallocate`, including `FALLOC_FL_PUNCH_HOLE` and `FALLOC_FL_KEEP_SIZE`.
  public func fallocate(_ ctx: RequestContext, node: NodeID, handle: UInt64, mode: Int32, offset: off_t, length: off_t)
    throws(Errno)
  {
    try Sys.fallocate(Int32(truncatingIfNeeded: handle), mode, offset, length)
  }

  /// `lseek` for `SEEK_DATA` and `SEEK_HOLE` (the kernel answers the others itself).
  public func lseek(_ ctx: RequestContext, node: NodeID, handle: UInt64, offset: off_t, whence: Int32) throws(Errno)
    -> off_t
  {
    try Sys.lseek(Int32(truncatingIfNeeded: handle), offset, whence)
  }

  /// `copy_file_range`: copied by the backing filesystem (reflinked where it can).
  public func copyFileRange(
    _ ctx: RequestContext, from: NodeID, handle inHandle: UInt64, offset inOffset: off_t, to: NodeID,
    handle outHandle: UInt64, offset outOffset: off_t, count: Int, flags: Int32
  ) throws(Errno) -> Int {
    try Sys.copyFileRange(
      Int32(truncatingIfNeeded: inHandle), inOffset, Int32(truncatingIfNeeded: outHandle), outOffset, count,
      UInt32(bitPattern: flags))
  }
}
