import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// The calling thread's filesystem credentials (Linux keeps them per thread).
///
/// A daemon running as root creates files as the requesting user by switching its worker
/// thread's fsuid, fsgid and supplementary groups around the call, then switching back.
public enum ThreadCredentials {
  /// Whether switching is possible (the process runs as root).
  public static let canSwitch: Bool = geteuid() == 0

  /// Runs `body` with the thread's filesystem uid, gid and groups set to the caller's.
  @inlinable
  public static func with<R, E: Error>(
    uid: uid_t, gid: gid_t, groups: UnsafeBufferPointer<gid_t>, _ body: () throws(E) -> R
  ) throws(E) -> R {
    guard canSwitch, uid != 0 || gid != 0 else { return try body() }
    _ = cposix_thread_setgroups(groups.count, groups.baseAddress)
    _ = cposix_setfsgid(gid)
    _ = cposix_setfsuid(uid)
    defer {
      _ = cposix_setfsuid(0)
      _ = cposix_setfsgid(0)
      _ = cposix_thread_setgroups(0, nil)
    }
    return try body()
  }
}
