import CFuse
import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// A FUSE node id: what the kernel calls an inode number on the wire.
///
/// Distinct from `st_ino` (what programs see in `stat`): a filesystem may use any value
/// it can map back to its node in O(1), except ``root`` which is fixed by FUSE.
public struct NodeID: Hashable, Sendable {
  /// The raw `fuse_ino_t`.
  public let rawValue: UInt64
  /// Wraps a raw node id.
  @inlinable public init(rawValue: UInt64) { self.rawValue = rawValue }
  /// `FUSE_ROOT_ID`.
  public static let root = NodeID(rawValue: 1)
}

/// Who sent a request.
public struct RequestContext {
  /// The raw request, for the groups look-up.
  @usableFromInline let request: fuse_req_t
  /// Calling process's user id.
  public let uid: uid_t
  /// Calling process's group id.
  public let gid: gid_t
  /// Calling thread's id.
  public let pid: pid_t
  /// Calling process's umask.
  public let umask: mode_t

  init(_ request: fuse_req_t) {
    self.request = request
    let ctx = fuse_req_ctx(request)!.pointee
    uid = ctx.uid
    gid = ctx.gid
    pid = ctx.pid
    umask = ctx.umask
  }

  /// Runs `body` with this thread's filesystem credentials switched to the caller's (uid,
  /// gid, supplementary groups), so that what it creates belongs to the caller.
  /// - Throws: EIO, without running `body`, when the switch fails (the daemon lacks
  ///   CAP_SETUID or CAP_SETGID): never does it act with its own identity for a caller.
  public func asCaller<R>(_ body: () throws(Errno) -> R) throws(Errno) -> R {
    guard ThreadCredentials.canSwitch, uid != 0 || gid != 0 else { return try body() }
    let groups = supplementaryGroups()
    return try groups.withUnsafeBufferPointer { (all) throws(Errno) -> R in
      try ThreadCredentials.with(uid: uid, gid: gid, groups: all, body)
    }
  }

  /// Runs `body`, which creates a file, directory or node with the mode it is given, as
  /// the caller (``asCaller(_:)``) and under the caller's umask, as a local filesystem
  /// applies it: not in a directory with a default ACL, whose entries then decide the new
  /// mode. The kernel sends `mode` unmasked (`FUSE_CAP_DONT_MASK`): the backing filesystem
  /// applies the umask, set on the worker thread alone.
  public func asCreator<R>(mode: mode_t, _ body: (mode_t) throws(Errno) -> R) throws(Errno) -> R {
    try asCaller { () throws(Errno) -> R in try ThreadUmask.with(umask, mode: mode, body) }
  }

  /// Whether the caller is in group `group` (its own or a supplementary one).
  public func isInGroup(_ group: gid_t) -> Bool {
    group == gid || supplementaryGroups().contains(group)
  }

  /// The calling process's supplementary groups (libfuse reads them from /proc).
  private func supplementaryGroups() -> [gid_t] {
    var groups = [gid_t](repeating: 0, count: 64)
    var count = Int(fuse_req_getgroups(request, Int32(groups.count), &groups))
    if count > groups.count {
      groups = [gid_t](repeating: 0, count: count)
      count = Int(fuse_req_getgroups(request, Int32(groups.count), &groups))
    }
    return Array(groups[..<max(0, min(count, groups.count))])
  }
}

/// The reply to lookup-like requests (`fuse_entry_param`).
public struct Entry {
  /// The node id the kernel will use for this entry (0 for a cached negative entry).
  public var node: NodeID
  /// Attributes; `st_ino` is what programs see.
  public var attributes: stat
  /// How long the kernel may cache the name.
  public var entryTimeout: Double
  /// How long the kernel may cache the attributes.
  public var attributeTimeout: Double
  /// The node's generation: file handles carry it with the node id, and the kernel
  /// refuses (ESTALE) a handle whose generation is not the node's. Every entry of one
  /// node must carry the same; the root's is 0.
  public var generation: UInt64

  /// Creates an entry reply.
  public init(node: NodeID, attributes: stat, entryTimeout: Double, attributeTimeout: Double, generation: UInt64 = 0) {
    self.node = node
    self.attributes = attributes
    self.entryTimeout = entryTimeout
    self.attributeTimeout = attributeTimeout
    self.generation = generation
  }

  /// libfuse's form of this entry.
  var parameters: fuse_entry_param {
    var param = fuse_entry_param()
    param.ino = node.rawValue
    param.generation = generation
    param.attr = attributes
    param.attr_timeout = attributeTimeout
    param.entry_timeout = entryTimeout
    return param
  }
}

/// The reply to open-like requests.
public struct OpenedFile {
  /// The handle the kernel passes back on every request on this open file.
  public var handle: UInt64
  /// Keep the kernel's page cache from an earlier open (the file did not change).
  public var keepCache: Bool = false
  /// Bypass the page cache for this open file.
  public var directIO: Bool = false
  /// Let the kernel cache directory listings of this handle.
  public var cacheDirectory: Bool = false
  /// The kernel need not send `flush` on each close of this file (`FOPEN_NOFLUSH`).
  public var noFlush: Bool = false
  /// The kernel serves reads and writes from this backing file (`FOPEN_PASSTHROUGH`; the
  /// cache flags do not apply).
  public var backing: BackingID?

  /// Creates an open reply.
  public init(
    handle: UInt64, keepCache: Bool = false, directIO: Bool = false, cacheDirectory: Bool = false,
    noFlush: Bool = false,
    backing: BackingID? = nil
  ) {
    self.handle = handle
    self.backing = backing
    self.keepCache = keepCache
    self.directIO = directIO
    self.cacheDirectory = cacheDirectory
    self.noFlush = noFlush
  }
}

/// What a read replies with.
public enum ReadData {
  /// `count` bytes of `fd` from `offset` (libfuse may splice them).
  case file(fd: Int32, offset: off_t, count: Int)
}

/// The bytes of a write request, which may sit in memory or in a pipe.
public struct WriteData {
  @usableFromInline let buffers: UnsafeMutablePointer<fuse_bufvec>

  /// How many bytes the request carries.
  public var count: Int { fuse_buf_size(buffers) }

  /// Copies the first `limit` bytes (all when nil) to `fd` at `offset`.
  /// - Returns: the number of bytes written.
  public func write(to fd: Int32, at offset: off_t, limit: Int? = nil) throws(Errno) -> Int {
    if let limit, limit < count { cfuse_bufvec_limit(buffers, limit) }
    let result = cfuse_write_buf_to_fd(buffers, fd, offset)
    if result < 0 { throw Errno(rawValue: Int32(-result)) }
    return result
  }
}

/// Which attributes a setattr request changes.
public struct SetAttributes: OptionSet, Sendable {
  /// The raw `FUSE_SET_ATTR_*` bits.
  public let rawValue: Int32
  /// Wraps raw bits.
  public init(rawValue: Int32) { self.rawValue = rawValue }
  /// `FUSE_SET_ATTR_MODE`.
  public static let mode = SetAttributes(rawValue: FUSE_SET_ATTR_MODE)
  /// `FUSE_SET_ATTR_UID`.
  public static let uid = SetAttributes(rawValue: FUSE_SET_ATTR_UID)
  /// `FUSE_SET_ATTR_GID`.
  public static let gid = SetAttributes(rawValue: FUSE_SET_ATTR_GID)
  /// `FUSE_SET_ATTR_SIZE`.
  public static let size = SetAttributes(rawValue: FUSE_SET_ATTR_SIZE)
  /// `FUSE_SET_ATTR_ATIME`.
  public static let atime = SetAttributes(rawValue: FUSE_SET_ATTR_ATIME)
  /// `FUSE_SET_ATTR_MTIME`.
  public static let mtime = SetAttributes(rawValue: FUSE_SET_ATTR_MTIME)
  /// `FUSE_SET_ATTR_ATIME_NOW`.
  public static let atimeNow = SetAttributes(rawValue: FUSE_SET_ATTR_ATIME_NOW)
  /// `FUSE_SET_ATTR_MTIME_NOW`.
  public static let mtimeNow = SetAttributes(rawValue: FUSE_SET_ATTR_MTIME_NOW)
  /// `FUSE_SET_ATTR_CTIME`.
  public static let ctime = SetAttributes(rawValue: FUSE_SET_ATTR_CTIME)
  /// `FUSE_SET_ATTR_KILL_SUID` (the kernel's `FATTR_KILL_SUIDGID` under
  /// FUSE_HANDLE_KILLPRIV_V2): a truncate or chown by a caller without CAP_FSETID; clear
  /// set-user-ID, and set-group-ID with group execute.
  public static let killSetID = SetAttributes(rawValue: FUSE_SET_ATTR_KILL_SUID)
}

/// A low-level FUSE filesystem. Every method serves one FUSE operation, runs synchronously
/// on a libfuse worker thread, and throws an ``Errno`` to fail; the bridge sends exactly
/// one reply per request. Methods that return an ``Entry`` add one to the node's lookup
/// count; ``forget(_:count:)`` takes counts away.
public protocol FuseFilesystem: AnyObject, Sendable {
  /// The mount is up; `notifier` can invalidate the kernel's caches from now on.
  func mounted(notifier: KernelNotifier)
  /// `lookup`: +1 lookup on the returned node. Filesystems get FUSE_CAP_EXPORT_SUPPORT,
  /// so `name` may also be "." (resolving a file handle: `parent` is then any node id the
  /// kernel once had, perhaps forgotten since, and must be that node or ESTALE) or ".."
  /// (the parent of the held directory `parent`).
  func lookup(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>) throws(Errno) -> Entry
  /// `forget` / `forget_multi`: the kernel dropped `count` lookups of `node`.
  func forget(_ node: NodeID, count: UInt64)
  /// `getattr`.
  func getattr(_ ctx: RequestContext, node: NodeID, handle: UInt64?) throws(Errno) -> stat
  /// `setattr`: change what `fields` names to the values in `attributes`.
  func setattr(
    _ ctx: RequestContext, node: NodeID, attributes: stat, fields: SetAttributes, handle: UInt64?
  ) throws(Errno) -> stat
  /// `readlink`.
  func readlink(_ ctx: RequestContext, node: NodeID) throws(Errno) -> [UInt8]
  /// `mknod`: +1 lookup.
  func mknod(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>, mode: mode_t, device: dev_t)
    throws(Errno) -> Entry
  /// `mkdir`: +1 lookup.
  func mkdir(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>, mode: mode_t) throws(Errno) -> Entry
  /// `unlink`.
  func unlink(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>) throws(Errno)
  /// `rmdir`.
  func rmdir(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>) throws(Errno)
  /// `symlink`: +1 lookup.
  func symlink(_ ctx: RequestContext, target: UnsafePointer<CChar>, parent: NodeID, name: UnsafePointer<CChar>)
    throws(Errno) -> Entry
  /// `rename` (flags: `RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
  func rename(
    _ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>, newParent: NodeID,
    newName: UnsafePointer<CChar>, flags: UInt32
  ) throws(Errno)
  /// `link`: +1 lookup on `node`.
  func link(_ ctx: RequestContext, node: NodeID, newParent: NodeID, newName: UnsafePointer<CChar>) throws(Errno)
    -> Entry
  /// `open`.
  func open(_ ctx: RequestContext, node: NodeID, flags: Int32) throws(Errno) -> OpenedFile
  /// `create`: +1 lookup.
  func create(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>, mode: mode_t, flags: Int32)
    throws(Errno) -> (Entry, OpenedFile)
  /// `read`.
  func read(_ ctx: RequestContext, node: NodeID, handle: UInt64, count: Int, offset: off_t) throws(Errno) -> ReadData
  /// `write_buf`: returns how many bytes were written.
  func write(_ ctx: RequestContext, node: NodeID, handle: UInt64, data: WriteData, offset: off_t) throws(Errno) -> Int
  /// `flush` (each close of a descriptor).
  func flush(_ ctx: RequestContext, node: NodeID, handle: UInt64) throws(Errno)
  /// `release` (the last close of an open file).
  func release(_ ctx: RequestContext, node: NodeID, handle: UInt64)
  /// `fsync`.
  func fsync(_ ctx: RequestContext, node: NodeID, handle: UInt64, dataOnly: Bool) throws(Errno)
  /// `opendir`.
  func opendir(_ ctx: RequestContext, node: NodeID, flags: Int32) throws(Errno) -> OpenedFile
  /// `readdir` / `readdirplus`: fill `filler` from `offset`; for `plus`, every added entry
  /// holds one lookup.
  func readdir(_ ctx: RequestContext, node: NodeID, handle: UInt64, offset: off_t, filler: inout DirectoryFiller)
    throws(Errno)
  /// `releasedir`.
  func releasedir(_ ctx: RequestContext, node: NodeID, handle: UInt64)
  /// `fsyncdir`.
  func fsyncdir(_ ctx: RequestContext, node: NodeID, handle: UInt64, dataOnly: Bool) throws(Errno)
  /// `statfs`.
  func statfs(_ ctx: RequestContext, node: NodeID) throws(Errno) -> statvfs
  /// `setxattr`.
  func setxattr(
    _ ctx: RequestContext, node: NodeID, name: UnsafePointer<CChar>, value: UnsafeRawBufferPointer, flags: Int32
  ) throws(Errno)
  /// `getxattr`: the whole value (the bridge handles size probes and ERANGE).
  func getxattr(_ ctx: RequestContext, node: NodeID, name: UnsafePointer<CChar>) throws(Errno) -> [UInt8]
  /// `listxattr`: NUL-terminated names, concatenated.
  func listxattr(_ ctx: RequestContext, node: NodeID) throws(Errno) -> [UInt8]
  /// `removexattr`.
  func removexattr(_ ctx: RequestContext, node: NodeID, name: UnsafePointer<CChar>) throws(Errno)
  /// `access`.
  func access(_ ctx: RequestContext, node: NodeID, mask: Int32) throws(Errno)
  /// `fallocate`.
  func fallocate(_ ctx: RequestContext, node: NodeID, handle: UInt64, mode: Int32, offset: off_t, length: off_t)
    throws(Errno)
  /// `lseek` (`SEEK_DATA`, `SEEK_HOLE`).
  func lseek(_ ctx: RequestContext, node: NodeID, handle: UInt64, offset: off_t, whence: Int32) throws(Errno) -> off_t
  /// `copy_file_range`: returns the bytes copied.
  func copyFileRange(
    _ ctx: RequestContext, from: NodeID, handle inHandle: UInt64, offset inOffset: off_t, to: NodeID,
    handle outHandle: UInt64, offset outOffset: off_t, count: Int, flags: Int32
  ) throws(Errno) -> Int
}
