import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// The cgroup v2 calls of a device's app confinement (docs/architecture.md#app-confinement):
/// finding or mounting the unified hierarchy, making and removing a run's group, a
/// process's group, and starting a program inside a group.
public enum ControlGroups {
  /// The mountpoint of a cgroup v2 hierarchy in this mount namespace, if one is mounted
  /// (read from `/proc/self/mountinfo`; on a machine that mounts cgroup v1, usually none).
  /// - Throws: the error reading `/proc/self/mountinfo`.
  public static func mountedHierarchy() throws(Errno) -> String? {
    let text = String(decoding: try Sys.readFile("/proc/self/mountinfo"), as: UTF8.self)
    for line in text.split(separator: "\n") {
      // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - TYPE SOURCE SUPER-OPTIONS
      let fields = line.split(separator: " ")
      guard let dash = fields.firstIndex(of: "-"), dash >= 6, dash + 1 < fields.count else { continue }
      let before = fields[..<dash]
      guard fields[dash + 1] == "cgroup2", before[before.startIndex + 3] == "/" else { continue }
      let options = before[before.startIndex + 5].split(separator: ",")
      guard !options.contains("ro") else { continue }
      return unescapeMountPath(String(before[before.startIndex + 4]))
    }
    return nil
  }

  /// Mounts the cgroup v2 hierarchy at `directory` (root, or CAP_SYS_ADMIN).
  public static func mountHierarchy(at directory: String) throws(Errno) {
    guard cposix_mount_cgroup2(directory) == 0 else { throw Errno.current }
  }

  /// Makes the group `path` (a directory of the hierarchy), mode 0755: only its owner
  /// moves processes into it.
  /// - Throws: `mkdir`'s error (EEXIST when it is there).
  public static func makeGroup(_ path: String) throws(Errno) {
    try Sys.mkdir(path, 0o755)
  }

  /// Removes the group `path`. EBUSY while a process is in it.
  public static func removeGroup(_ path: String) throws(Errno) {
    guard Glibc.rmdir(path) == 0 else { throw Errno.current }
  }

  /// Holds a shared `flock(2)` on the group directory `fd` (waiting for an exclusive one to
  /// go): a daemon's claim on its mount's directory, which ends with the daemon.
  public static func claim(_ fd: Int32) throws(Errno) {
    _ = try retryingEINTR { cposix_flock(fd, cposix_lock_shared()) }
  }

  /// The names of the groups directly below the group directory `fd` (its subdirectories).
  public static func subgroups(of fd: Int32) throws(Errno) -> [String] {
    let stream = try DirectoryStream(fd: try Sys.dup(fd))
    var names: [String] = []
    while let item = try stream.next() {
      guard item.type == DT_DIR || item.type == DT_UNKNOWN else { continue }
      let name = String(cString: item.name)
      if name != "." && name != ".." { names.append(name) }
    }
    return names
  }

  /// The cgroup v2 path of thread `tid` (the `0::` line of `/proc/TID/cgroup`, e.g.
  /// `/appbox/1/run-3`), as bytes.
  /// - Throws: ENOENT or ESRCH when there is no such thread (or it is in another pid
  ///   namespace); EINVAL when the file has no cgroup v2 line; other errors of the read.
  public static func group(of tid: pid_t) throws(Errno) -> [UInt8] {
    guard tid > 0 else { throw Errno.invalidArgument }
    let bytes = try Sys.readFile("/proc/\(tid)/cgroup")
    var start = bytes.startIndex
    while start < bytes.endIndex {
      let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
      let line = bytes[start..<end]
      if line.starts(with: [UInt8(ascii: "0"), UInt8(ascii: ":"), UInt8(ascii: ":")]) {
        return Array(line.dropFirst(3))
      }
      start = end == bytes.endIndex ? end : end + 1
    }
    throw Errno.invalidArgument
  }

  /// Starts `program` (a path, or a name looked up in `PATH`) with `arguments` (argv[0]
  /// included) and exactly `environment`, placed from its first instant in the group
  /// `group` (an open descriptor of its directory), as ``ProgramLaunch/start(_:_:environment:)``
  /// starts one otherwise, and makes it the target of forwarded signals.
  /// - Returns: its process id.
  /// - Throws: EACCES when this process may not move processes into `group`; the exec's
  ///   error (ENOENT: not found).
  public static func start(
    _ program: String, _ arguments: [String], environment: [String: String], in group: Int32
  ) throws(Errno) -> pid_t {
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var envp: [UnsafeMutablePointer<CChar>?] =
      environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { envp.forEach { free($0) } }
    var pid: pid_t = 0
    let result = cposix_spawn_into_cgroup(program, &argv, &envp, group, &pid)
    guard result == 0 else { throw Errno(rawValue: result) }
    ProgramLaunch.forward(to: pid)
    return pid
  }

  /// `/proc/self/mountinfo`'s octal escapes (`\040` for a space…) undone.
  static func unescapeMountPath(_ text: String) -> String {
    var bytes: [UInt8] = []
    let utf8 = Array(text.utf8)
    var index = 0
    while index < utf8.count {
      if utf8[index] == UInt8(ascii: "\\"), index + 3 < utf8.count,
        let value = UInt8(String(decoding: utf8[(index + 1)...(index + 3)], as: UTF8.self), radix: 8)
      {
        bytes.append(value)
        index += 4
      } else {
        bytes.append(utf8[index])
        index += 1
      }
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}

/// A descriptor of one thread (`pidfd_open` with `PIDFD_THREAD`) that tells whether that
/// thread has exited: a thread id is reused only after its thread has exited, so a record
/// made about a thread holds while its descriptor says it lives.
public struct ThreadDescriptor: ~Copyable, Sendable {
  /// The descriptor.
  public let fd: Int32

  /// A descriptor of thread `tid` (Linux >= 6.9).
  /// - Throws: ESRCH when there is no such thread; EINVAL on an older kernel.
  public init(thread tid: pid_t) throws(Errno) {
    let fd = cposix_pidfd_open_thread(tid)
    guard fd >= 0 else { throw Errno.current }
    self.fd = fd
  }

  /// Whether the thread has exited (one `poll` that does not wait). An error of the poll
  /// counts as exited: the caller then looks again.
  public var hasExited: Bool {
    var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let ready = poll(&entry, 1, 0)
    return ready != 0
  }

  deinit { Sys.close(fd) }
}

/// An epoll set of ``ThreadDescriptor``s that tells which threads have exited: the
/// daemon's run records learn of an exit from one thread that waits here, so that a request
/// checks a flag instead of polling its thread's descriptor.
public final class ThreadExitWatch: Sendable {
  private let epoll: Int32

  /// A new, empty set.
  /// - Throws: `epoll_create1`'s error.
  public init() throws(Errno) {
    let fd = cposix_epoll_create()
    guard fd >= 0 else { throw Errno.current }
    epoll = fd
  }

  deinit { Sys.close(epoll) }

  /// Watches `thread` (until its descriptor is closed); ``waitForExits()`` returns `key`
  /// once it has exited (at once if it has).
  /// - Throws: `epoll_ctl`'s error.
  public func watch(_ thread: borrowing ThreadDescriptor, key: UInt64) throws(Errno) {
    guard cposix_epoll_watch_once(epoll, thread.fd, key) == 0 else { throw Errno.current }
  }

  /// Waits until at least one watched thread has exited.
  /// - Returns: the keys of those that have (each once).
  public func waitForExits() -> [UInt64] {
    var keys = [UInt64](repeating: 0, count: 64)
    while true {
      let count = cposix_epoll_wait_keys(epoll, &keys, Int32(keys.count))
      if count > 0 { return Array(keys[..<Int(count)]) }
      if count < 0 && errno != EINTR { return [] }
    }
  }
}
