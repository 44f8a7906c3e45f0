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
  /// - Throws: EIO, without running `body`, when a switch fails (`setfsuid` and
  ///   `setfsgid` report no error: the new value is read back), after switching back.
  @inlinable
  public static func with<R>(
    uid: uid_t, gid: gid_t, groups: UnsafeBufferPointer<gid_t>, _ body: () throws(Errno) -> R
  ) throws(Errno) -> R {
    guard canSwitch, uid != 0 || gid != 0 else { return try body() }
    defer {
      _ = cposix_setfsuid(0)
      _ = cposix_setfsgid(0)
      _ = cposix_thread_setgroups(0, nil)
    }
    let injected = SyscallFaults.injected(.setfsuid) != nil  // as if a switch had not taken
    let grouped = cposix_thread_setgroups(groups.count, groups.baseAddress) == 0
    _ = cposix_setfsgid(gid)
    _ = cposix_setfsuid(uid)
    // An invalid id changes nothing and returns the current one.
    guard !injected, grouped, cposix_setfsgid(gid_t.max) == gid, cposix_setfsuid(uid_t.max) == uid else {
      throw .ioError
    }
    return try body()
  }
}
