import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

// Path-based calls for the command line (the request path works on descriptors only).

extension Sys {
  /// `realpath(3)`: the absolute path with every symlink, `.` and `..` resolved.
  public static func realpath(_ path: String) throws(Errno) -> String {
    guard let resolved = Glibc.realpath(path, nil) else { throw Errno.current }
    defer { free(resolved) }
    return String(cString: resolved)
  }

  /// `stat(2)` (follows a final symlink).
  public static func statPath(_ path: String) throws(Errno) -> Glibc.stat {
    var st = Glibc.stat()
    try check(Glibc.fstatat(AT_FDCWD, path, &st, 0))
    return st
  }

  /// `lstat(2)` (describes a final symlink itself).
  public static func lstatPath(_ path: String) throws(Errno) -> Glibc.stat {
    var st = Glibc.stat()
    try check(Glibc.fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW))
    return st
  }

  /// `open(2)` of a path, close-on-exec always.
  public static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0) throws(Errno) -> Int32 {
    try retryingEINTR { cposix_openat(AT_FDCWD, path, flags | O_CLOEXEC, mode) }
  }

  /// `read(2)` into a buffer; 0 at end of file.
  public static func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
    try retryingEINTR { Glibc.read(fd, buffer.baseAddress, buffer.count) }
  }

  /// Reads `fd` from its offset to the end. A file in `/proc` is produced a page or so
  /// per `read`, so a single read (or a reader that stops at a short one) sees only its
  /// beginning: this reads until `read` returns 0.
  public static func readToEnd(_ fd: Int32, limit: Int = 64 << 20) throws(Errno) -> [UInt8] {
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while result.count < limit {
      let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if count < 0 {
        if errno == EINTR { continue }
        throw Errno.current
      }
      if count == 0 { break }
      result += chunk[..<count]
    }
    return result
  }

  /// The whole content of the file at `path` (see ``readToEnd(_:limit:)``).
  public static func readFile(_ path: String) throws(Errno) -> [UInt8] {
    let fd = try open(path, O_RDONLY)
    defer { close(fd) }
    return try readToEnd(fd)
  }

  /// Writes all of `bytes` to `fd`.
  public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(Errno) {
    var offset = 0
    while offset < bytes.count {
      let count = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      if count < 0 {
        if errno == EINTR { continue }
        throw Errno.current
      }
      if count == 0 { throw Errno.ioError }
      offset += count
    }
  }

  /// Replaces the file at `path` with `bytes` in one step (a new file, created with
  /// `mode` exactly, renamed over the old one).
  public static func replaceFile(_ path: String, with bytes: [UInt8], mode: mode_t) throws(Errno) {
    let temporary = path + ".new"
    _ = Glibc.unlink(temporary)
    let fd = try open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode)
    do {
      try check(Glibc.fchmod(fd, mode))  // the umask does not decide
      try writeAll(fd, bytes)
      close(fd)
      try check(Glibc.rename(temporary, path))
    } catch {
      close(fd)
      _ = Glibc.unlink(temporary)
      throw error
    }
  }

  /// `mkdir(2)`.
  public static func mkdir(_ path: String, _ mode: mode_t) throws(Errno) {
    try check(Glibc.mkdir(path, mode))
  }

  /// `chmod(2)` of a path.
  public static func chmod(_ path: String, _ mode: mode_t) throws(Errno) {
    try check(Glibc.chmod(path, mode))
  }

  /// `rename(2)` of a path to another.
  public static func rename(_ path: String, to newPath: String) throws(Errno) {
    try check(Glibc.rename(path, newPath))
  }

  /// `mkdtemp(3)`: a new directory (mode 0700) named `prefix` and six random characters.
  /// - Returns: its path.
  public static func makeTemporaryDirectory(prefix: String) throws(Errno) -> String {
    var template = Array((prefix + "XXXXXX").utf8CString)
    guard let made = Glibc.mkdtemp(&template) else { throw Errno.current }
    return String(cString: made)
  }

  /// `unlink(2)`.
  public static func unlink(_ path: String) throws(Errno) {
    try check(Glibc.unlink(path))
  }

  /// `access(2)` with the real ids.
  public static func access(_ path: String, _ mode: Int32) throws(Errno) {
    try check(Glibc.access(path, mode))
  }

  /// Takes an exclusive `flock(2)` on `fd` without waiting; throws `EWOULDBLOCK` when
  /// another open file description holds it.
  public static func lockExclusively(_ fd: Int32) throws(Errno) {
    _ = try retryingEINTR { cposix_flock(fd, cposix_lock_exclusive_nonblocking()) }
  }

  /// The effective user id of this process.
  public static var effectiveUID: uid_t { geteuid() }
}

extension Errno {
  /// Resource temporarily unavailable (`EAGAIN`, `EWOULDBLOCK`): e.g. a lock held elsewhere.
  public static let wouldBlock = Errno(rawValue: EAGAIN)
  /// Connection refused (`ECONNREFUSED`): a socket nobody listens on.
  public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
}

extension Sys {
  /// `dup2(2)`: makes `target` a copy of `fd`.
  public static func dup2(_ fd: Int32, _ target: Int32) throws(Errno) {
    _ = try retryingEINTR { Glibc.dup2(fd, target) }
  }

  /// `umask(2)`: sets the file mode creation mask; returns the previous one.
  @discardableResult
  public static func umask(_ mask: mode_t) -> mode_t { Glibc.umask(mask) }

  /// This process's id.
  public static var processID: pid_t { getpid() }

  /// `isatty(3)`: whether `fd` is a terminal.
  public static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }
}
