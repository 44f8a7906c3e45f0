#if canImport(Glibc)
  import Glibc
#endif

/// inotify(7): a descriptor that becomes readable when a watched file changes, so a
/// reader of an append-only log wakes on each append instead of polling.
public enum Inotify {
  /// A new inotify descriptor (close-on-exec, non-blocking).
  /// - Throws: EMFILE when the user's `max_user_instances` are in use, ENOSYS without inotify.
  public static func open() throws(Errno) -> Int32 {
    let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
    guard fd >= 0 else { throw Errno.current }
    return fd
  }

  /// Watches the file at `path` for writes (`IN_MODIFY`) on the inotify descriptor `fd`.
  /// - Throws: ENOSPC when the user's `max_user_watches` are in use; the path's errors.
  public static func watchWrites(_ fd: Int32, path: String) throws(Errno) {
    guard inotify_add_watch(fd, path, UInt32(IN_MODIFY)) >= 0 else { throw Errno.current }
  }

  /// Waits until `fd` has events, a signal comes, or `seconds` have passed (the caller
  /// looks at the file again in any case).
  public static func wait(_ fd: Int32, seconds: Double) {
    var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    _ = poll(&entry, 1, Int32(seconds * 1000))
  }

  /// Reads and discards the events waiting on `fd` (the caller reads the file itself).
  public static func drain(_ fd: Int32) {
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if count < 0 && errno == EINTR { continue }
      if count <= 0 { return }
    }
  }
}
