import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// Starting child processes and waiting for processes to end (the CLI's only process calls).
public enum Spawn {
  /// Starts `path` with `arguments` (argv[0] included) and the current environment plus
  /// `environment` (`NAME=value` entries, which replace same-named ones). With `detach`, the child runs in a new session with standard input from `/dev/null`,
  /// and inherits no descriptor but the standard ones and `passing`, which it gets as
  /// descriptor 3.
  /// - Returns: the child's process id.
  public static func start(
    _ path: String, _ arguments: [String], detach: Bool = false, passing: Int32? = nil, environment: [String] = []
  ) throws(Errno) -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    if detach {
      posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
      posix_spawnattr_setflags(&attributes, cposix_spawn_setsid())
      if let passing {
        posix_spawn_file_actions_adddup2(&actions, passing, 3)
        cposix_spawn_addclosefrom(&actions, 4)
      } else {
        cposix_spawn_addclosefrom(&actions, 3)
      }
    }
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let result: Int32
    if environment.isEmpty {
      result = posix_spawn(&pid, path, &actions, &attributes, &argv, environ)
    } else {
      let names = Set(environment.map { $0.prefix { $0 != "=" } })
      var inherited: [String] = []
      var entry = environ
      while let pointer = entry.pointee {
        let text = String(cString: pointer)
        if !names.contains(text.prefix { $0 != "=" }) { inherited.append(text) }
        entry += 1
      }
      var envp: [UnsafeMutablePointer<CChar>?] = (inherited + environment).map { strdup($0) } + [nil]
      defer { envp.forEach { free($0) } }
      result = posix_spawn(&pid, path, &actions, &attributes, &argv, &envp)
    }
    guard result == 0 else { throw Errno(rawValue: result) }
    return pid
  }

  /// Waits for `pid` to end.
  /// - Returns: its exit code, or 128 + the signal that killed it.
  public static func wait(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
      if errno != EINTR { return 127 }
    }
    let signal = status & 0x7f
    return signal == 0 ? (status >> 8) & 0xff : 128 + signal
  }

  /// Waits up to `milliseconds` for process `pid`, which need not be a child, to exit.
  /// A zombie has exited: a daemon's parent is init, which may reap it only seconds later.
  /// - Returns: true once it has exited (or no such process exists).
  public static func waitForExit(_ pid: pid_t, milliseconds: Int32) -> Bool {
    let descriptor = cposix_pidfd_open(pid)
    guard descriptor >= 0 else { return errno == ESRCH }
    defer { close(descriptor) }
    var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
    while true {
      let ready = poll(&entry, 1, milliseconds)
      if ready >= 0 { return ready > 0 }
      if errno != EINTR { return false }
    }
  }

  /// Whether process `pid` exists and has not exited (see ``waitForExit(_:milliseconds:)``).
  public static func isRunning(_ pid: pid_t) -> Bool { !waitForExit(pid, milliseconds: 0) }

  /// Runs a program to completion.
  /// - Returns: its exit code (127 when it could not be started).
  public static func run(_ path: String, _ arguments: [String]) -> Int32 {
    do { return wait(try start(path, arguments)) } catch { return 127 }
  }

  /// The path of the running executable.
  public static var currentExecutable: String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard count > 0 else { return CommandLine.arguments[0] }
    return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

/// A pipe whose read end stays in this process and whose write end a child inherits.
public struct ReadinessPipe {
  /// Read end (close-on-exec).
  public let readFD: Int32
  /// Write end (inherited by children).
  public let writeFD: Int32

  /// Creates the pipe.
  public init() throws(Errno) {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw Errno.current }
    readFD = fds[0]
    writeFD = fds[1]
    _ = fcntl(readFD, F_SETFD, FD_CLOEXEC)
  }

  /// Reads until every write end is closed, handing each complete line (without its
  /// newline) to `line` as it arrives.
  /// - Returns: what came after the last newline.
  public func readLines(_ line: ([UInt8]) -> Void) -> [UInt8] {
    var pending: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = Glibc.read(readFD, &buffer, buffer.count)
      if count < 0 && errno == EINTR { continue }
      if count <= 0 { return pending }
      pending += buffer[..<count]
      while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
        line(Array(pending[..<newline]))
        pending.removeSubrange(...newline)
      }
    }
  }

  /// Keeps an inherited write end from this process's own children (a helper such as
  /// fusermount3 that outlives the handshake would hold the pipe open).
  public static func keepFromChildren(_ fd: Int32) {
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
  }

  /// Writes a line to a pipe's write end, leaving it open.
  public static func post(_ line: String, to fd: Int32) {
    var bytes = Array((line + "\n").utf8)
    _ = Glibc.write(fd, &bytes, bytes.count)
  }

  /// Writes a message to a pipe's write end and closes it.
  public static func send(_ message: String, to fd: Int32) {
    var bytes = Array(message.utf8)
    _ = Glibc.write(fd, &bytes, bytes.count)
    Glibc.close(fd)
  }
}
