import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// The calling thread's umask.
///
/// Linux keeps the umask in a filesystem context that a process's threads share; a worker
/// thread takes one of its own (`unshare(CLONE_FS)`, once) before it sets a caller's
/// umask, so no other request sees it. The thread keeps the last umask set: every create
/// on a worker thread goes through ``with(_:mode:_:)``, which sets its own, and most
/// callers share one umask, so most creates make no umask call at all.
public enum ThreadUmask {
  /// Runs `body` under umask `mask` on this thread, and passes it the mode to create with:
  /// `mode` itself, which the kernel then masks, or honours a default ACL instead, as for
  /// any program; or, where the thread cannot have a umask of its own, `mode` with `mask`
  /// taken off (never a mode more open than the caller asked for).
  @inlinable
  public static func with<R, E: Error>(_ mask: mode_t, mode: mode_t, _ body: (mode_t) throws(E) -> R) throws(E) -> R {
    let mask = mask & 0o777
    guard cposix_set_thread_umask(mask) == 0 else { return try body(mode & ~mask) }
    return try body(mode)
  }
}
