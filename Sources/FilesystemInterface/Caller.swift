import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// Where a ``Caller``'s supplementary groups come from: the driver looks them up only when
/// a handler asks (libfuse reads them from `/proc`, which costs a file read).
public protocol SupplementaryGroups {
  /// The calling process's supplementary groups.
  func supplementaryGroups() -> [gid_t]
}

extension Array: SupplementaryGroups where Element == gid_t {
  /// The groups themselves (for drivers that know them up front, e.g. tests).
  public func supplementaryGroups() -> [gid_t] { self }
}

/// Who sent a request: the calling process's credentials and umask, as a value.
public struct Caller {
  /// Calling process's user id.
  public let uid: uid_t
  /// Calling process's group id.
  public let gid: gid_t
  /// Calling thread's id.
  public let pid: pid_t
  /// Calling process's umask.
  public let umask: mode_t
  /// Looked up on demand.
  private let groups: any SupplementaryGroups

  /// A caller whose supplementary groups `groups` looks up when needed.
  public init(uid: uid_t, gid: gid_t, pid: pid_t, umask: mode_t, groups: any SupplementaryGroups = [gid_t]()) {
    self.uid = uid
    self.gid = gid
    self.pid = pid
    self.umask = umask
    self.groups = groups
  }

  /// The calling process's supplementary groups (looked up by the driver on each call).
  public var supplementaryGroups: [gid_t] { groups.supplementaryGroups() }

  /// Runs `body` with this thread's filesystem credentials switched to the caller's (uid,
  /// gid, supplementary groups), so that what it creates belongs to the caller.
  /// - Throws: EIO, without running `body`, when the switch fails (the daemon lacks
  ///   CAP_SETUID or CAP_SETGID): never does it act with its own identity for a caller.
  public func asCaller<R>(_ body: () throws(Errno) -> R) throws(Errno) -> R {
    guard ThreadCredentials.canSwitch, uid != 0 || gid != 0 else { return try body() }
    let groups = supplementaryGroups
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
    group == gid || supplementaryGroups.contains(group)
  }
}
