import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// The process's resource limits.
public enum ResourceLimits {
  /// The open-file limit in force.
  public static var openFiles: UInt64 {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    return UInt64(limit.rlim_cur)
  }

  /// How many CPUs this process may run on (its affinity: a container's cpuset, taskset).
  public static var availableCPUs: Int { Int(cposix_available_cpus()) }

  /// Raises the open-file limit as far as allowed: every inode the kernel holds costs the
  /// daemon one descriptor. Root may raise the hard limit up to `fs.nr_open`.
  /// - Returns: the limit now in force.
  @discardableResult
  public static func raiseOpenFiles() -> UInt64 {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    if geteuid() == 0 {
      var ceiling = rlimit(rlim_cur: 1 << 20, rlim_max: 1 << 20)
      if let text = String(contentsOfFileSystemPath: "/proc/sys/fs/nr_open"), let value = rlim_t(text) {
        ceiling = rlimit(rlim_cur: value, rlim_max: value)
      }
      if ceiling.rlim_max > limit.rlim_max, setrlimit(Int32(RLIMIT_NOFILE.rawValue), &ceiling) == 0 {
        return UInt64(ceiling.rlim_cur)
      }
    }
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    return UInt64(limit.rlim_cur)
  }
}

extension String {
  /// The first word of a small file (e.g. a number under `/proc`), read with plain syscalls.
  init?(contentsOfFileSystemPath path: String) {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 256)
    let count = read(fd, &buffer, buffer.count)
    guard count > 0 else { return nil }
    let digits = buffer[..<count].prefix { $0 != UInt8(ascii: "\n") && $0 != UInt8(ascii: " ") }
    self = String(decoding: digits, as: UTF8.self)
  }
}
