#if canImport(Glibc)
  import Glibc
#endif

/// The termination signals of a long-running client command (`appbox pressure`).
public enum TerminationSignals {
  /// Unblocks SIGINT, SIGTERM, SIGHUP and SIGQUIT in the calling thread: a process
  /// started from a thread that blocks them (a dispatch worker's mask, Foundation's
  /// `Process`) inherits that mask, and Ctrl-C would stay pending forever. Their actions
  /// are left as they are (a background job's ignored SIGINT stays ignored).
  /// - Throws: `pthread_sigmask`'s error.
  public static func unblock() throws(Errno) {
    var set = sigset_t()
    sigemptyset(&set)
    for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] { sigaddset(&set, signal) }
    let result = pthread_sigmask(SIG_UNBLOCK, &set, nil)
    guard result == 0 else { throw Errno(rawValue: result) }
  }

  /// Ignores SIGPIPE in the whole process: a write to a pipe or socket whose reader has
  /// gone fails with `EPIPE` instead of ending the process. A daemon sets this before it
  /// serves anyone (libfuse only installs its own handler once the session loop runs).
  public static func ignoreBrokenPipes() {
    signal(SIGPIPE, SIG_IGN)
  }
}
