import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// A low-level filesystem, free of FUSE types: what AppBoxFS implements and a driver calls
/// (the FUSE bridge on a mount, an in-memory driver in tests).
///
/// Every method serves one operation, runs synchronously on the driver's thread, and
/// either returns its reply's value or throws an ``Errno`` (a positive errno). That is
/// how "exactly one reply per request" is guaranteed: a method can neither reply nor
/// fail to, since the driver turns its one outcome (value or error) into the one reply
/// it sends. Methods that return an ``Entry`` add one to the node's lookup count;
/// ``forget(_:count:)`` takes counts away.
public protocol Filesystem: AnyObject, Sendable {
  /// The mount is up; `notifier` can invalidate the kernel's caches from now on.
  func mounted(notifier: any KernelNotifier)
  /// `lookup`: +1 lookup on the returned node. Drivers offer file handles
  /// (FUSE_CAP_EXPORT_SUPPORT), so `name` may also be "." (resolving a file handle:
  /// `parent` is then any node id the kernel once had, perhaps forgotten since, and must be
  /// that node or ESTALE) or ".." (the parent of the held directory `parent`).
  func lookup(_ ctx: Caller, parent: NodeID, name: FileName) throws(Errno) -> Entry
  /// `forget` / `forget_multi`: the kernel dropped `count` lookups of `node`.
  func forget(_ node: NodeID, count: UInt64)
  /// Whether the kernel may keep `node`'s attributes for the configured time; false: it
  /// must ask again before it uses them (a `getattr` reply with no timeout).
  func cachesAttributes(of node: NodeID) -> Bool
  /// `getattr`.
  func getattr(_ ctx: Caller, node: NodeID, handle: FileHandle?) throws(Errno) -> stat
  /// `setattr`: change what `fields` names to the values in `attributes`.
  func setattr(
    _ ctx: Caller, node: NodeID, attributes: stat, fields: SetAttributes, handle: FileHandle?
  ) throws(Errno) -> stat
  /// `readlink`.
  func readlink(_ ctx: Caller, node: NodeID) throws(Errno) -> [UInt8]
  /// `mknod`: +1 lookup.
  func mknod(_ ctx: Caller, parent: NodeID, name: FileName, mode: mode_t, device: dev_t)
    throws(Errno) -> Entry
  /// `mkdir`: +1 lookup.
  func mkdir(_ ctx: Caller, parent: NodeID, name: FileName, mode: mode_t) throws(Errno) -> Entry
  /// `unlink`.
  func unlink(_ ctx: Caller, parent: NodeID, name: FileName) throws(Errno)
  /// `rmdir`.
  func rmdir(_ ctx: Caller, parent: NodeID, name: FileName) throws(Errno)
  /// `symlink`: +1 lookup.
  func symlink(_ ctx: Caller, target: FileName, parent: NodeID, name: FileName)
    throws(Errno) -> Entry
  /// `rename` (flags: `RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
  func rename(
    _ ctx: Caller, parent: NodeID, name: FileName, newParent: NodeID,
    newName: FileName, flags: UInt32
  ) throws(Errno)
  /// `link`: +1 lookup on `node`.
  func link(_ ctx: Caller, node: NodeID, newParent: NodeID, newName: FileName) throws(Errno)
    -> Entry
  /// `open`.
  func open(_ ctx: Caller, node: NodeID, flags: Int32) throws(Errno) -> OpenedFile
  /// `create`: +1 lookup.
  func create(_ ctx: Caller, parent: NodeID, name: FileName, mode: mode_t, flags: Int32)
    throws(Errno) -> (Entry, OpenedFile)
  /// `read`.
  func read(_ ctx: Caller, node: NodeID, handle: FileHandle, count: Int, offset: off_t) throws(Errno) -> ReadData
  /// `write_buf`: returns how many bytes were written, and the pages to drop first.
  func write(_ ctx: Caller, node: NodeID, handle: FileHandle, data: some WriteData, offset: off_t) throws(Errno)
    -> Written
  /// `flush` (each close of a descriptor).
  func flush(_ ctx: Caller, node: NodeID, handle: FileHandle) throws(Errno)
  /// `release` (the last close of an open file).
  func release(_ ctx: Caller, node: NodeID, handle: FileHandle)
  /// `fsync`.
  func fsync(_ ctx: Caller, node: NodeID, handle: FileHandle, dataOnly: Bool) throws(Errno)
  /// Whether `opendir` must reach the filesystem. When false, and the kernel can open
  /// directories on its own (`FUSE_NO_OPENDIR_SUPPORT`), the driver answers the first
  /// `opendir` with ENOSYS: the kernel then sends neither `opendir` nor `releasedir` on the
  /// mount, keeps listings cached across opens, and `readdir` and `fsyncdir` come with
  /// ``FileHandle/none``.
  var needsOpendir: Bool { get }
  /// `opendir`.
  func opendir(_ ctx: Caller, node: NodeID, flags: Int32) throws(Errno) -> OpenedFile
  /// `readdir` / `readdirplus`: fill `filler` from `offset`; for `plus`, every added entry
  /// holds one lookup. `handle` is ``FileHandle/none`` when the kernel opened the directory
  /// on its own (``needsOpendir``).
  func readdir(
    _ ctx: Caller, node: NodeID, handle: FileHandle, offset: off_t, filler: inout some DirectoryFiller & ~Copyable)
    throws(Errno)
  /// `releasedir`.
  func releasedir(_ ctx: Caller, node: NodeID, handle: FileHandle)
  /// `fsyncdir`.
  func fsyncdir(_ ctx: Caller, node: NodeID, handle: FileHandle, dataOnly: Bool) throws(Errno)
  /// `statfs`.
  func statfs(_ ctx: Caller, node: NodeID) throws(Errno) -> statvfs
  /// `setxattr`.
  func setxattr(
    _ ctx: Caller, node: NodeID, name: FileName, value: UnsafeRawBufferPointer, flags: Int32
  ) throws(Errno)
  /// `getxattr`: the whole value (the bridge handles size probes and ERANGE).
  func getxattr(_ ctx: Caller, node: NodeID, name: FileName) throws(Errno) -> [UInt8]
  /// `listxattr`: NUL-terminated names, concatenated.
  func listxattr(_ ctx: Caller, node: NodeID) throws(Errno) -> [UInt8]
  /// `removexattr`.
  func removexattr(_ ctx: Caller, node: NodeID, name: FileName) throws(Errno)
  /// `access`.
  func access(_ ctx: Caller, node: NodeID, mask: Int32) throws(Errno)
  /// `fallocate`.
  func fallocate(_ ctx: Caller, node: NodeID, handle: FileHandle, mode: Int32, offset: off_t, length: off_t)
    throws(Errno)
  /// `lseek` (`SEEK_DATA`, `SEEK_HOLE`).
  func lseek(_ ctx: Caller, node: NodeID, handle: FileHandle, offset: off_t, whence: Int32) throws(Errno) -> off_t
  /// `copy_file_range`: returns the bytes copied.
  func copyFileRange(
    _ ctx: Caller, from: NodeID, handle inHandle: FileHandle, offset inOffset: off_t, to: NodeID,
    handle outHandle: FileHandle, offset outOffset: off_t, count: Int, flags: Int32
  ) throws(Errno) -> Int
}

extension Filesystem {
  /// Every node's: the configured time.
  public func cachesAttributes(of node: NodeID) -> Bool { true }
}
