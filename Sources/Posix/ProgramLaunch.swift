import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// Running a user's program in the foreground for `appbox run`: looked up in `PATH` as a
/// shell does, with its own environment, termination signals forwarded to it.
public enum ProgramLaunch {
  /// Starts forwarding SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to this process (by
  /// another process: a terminal's reach the program directly) to the program started
  /// next; a signal that arrives before it starts is delivered once it has.
  public static func forwardSignals() throws(Errno) {
    guard cposix_forward_signals_install() == 0 else { throw Errno.current }
  }

  /// Starts `program` (a path, or a name looked up in this process's `PATH`) with
  /// `arguments` (argv[0] included) and exactly `environment`, in this process group, and
  /// makes it the target of forwarded signals. It starts with no signal blocked and the
  /// termination signals and SIGPIPE at their default action, whatever this process had.
  /// - Returns: its process id.
  /// - Throws: `posix_spawnp`'s error (ENOENT: not found, EACCES: not executable).
  public static func start(_ program: String, _ arguments: [String], environment: [String: String])
    throws(Errno) -> pid_t
  {
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var envp: [UnsafeMutablePointer<CChar>?] =
      environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { envp.forEach { free($0) } }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    guard cposix_spawnattr_reset_signals(&attributes) == 0 else { throw Errno.invalidArgument }
    var pid: pid_t = 0
    let result = posix_spawnp(&pid, program, nil, &attributes, &argv, &envp)
    guard result == 0 else { throw Errno(rawValue: result) }
    cposix_forward_signals_to(pid)
    return pid
  }

  /// Makes `pid` the target of forwarded signals (a program started otherwise than by
  /// ``start(_:_:environment:)``).
  public static func forward(to pid: pid_t) {
    cposix_forward_signals_to(pid)
  }

  /// Stops forwarding signals: those that come from now on are kept, and forwarded only
  /// to a program started later.
  public static func stopForwarding() {
    cposix_forward_signals_to(0)
  }

  /// Waits for the program to end, then stops forwarding signals to it (before its pid is
  /// released, so a late signal never reaches a recycled pid). Other children that end
  /// meanwhile (orphaned descendants, re-parented here when this process is a child
  /// subreaper) are reaped.
  /// - Returns: its exit code, or 128 + the signal that ended it.
  public static func wait(_ pid: pid_t) -> Int32 {
    while true {
      var info = siginfo_t()
      guard waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) == 0 else {
        if errno == EINTR { continue }
        break
      }
      let exited = info._sifields._sigchld.si_pid
      if exited == pid || exited <= 0 { break }
      var status: Int32 = 0
      _ = waitpid(exited, &status, 0)
    }
    cposix_forward_signals_to(0)
    return Spawn.wait(pid)
  }
}
