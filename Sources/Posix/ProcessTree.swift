import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// A process as `/proc/PID/stat` describes it: enough to walk up its ancestry and to tell
/// it from a later process that reuses its pid.
public struct ProcessStat: Equatable, Sendable {
  /// Its parent's pid (0 for init and kernel threads' parent).
  public let parent: pid_t
  /// When it started, in clock ticks after boot (field 22): with the pid, names one
  /// process for the machine's uptime.
  public let startTime: UInt64

  /// Creates a record.
  public init(parent: pid_t, startTime: UInt64) {
    self.parent = parent
    self.startTime = startTime
  }

  /// Parses the contents of `/proc/PID/stat`. The command name (field 2) is in parentheses
  /// and may hold spaces and parentheses itself, so the fields are counted from its last
  /// `)`.
  public init?(parsing bytes: [UInt8]) {
    guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
    let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
    // fields[0] is field 3 (the state), so field N is fields[N - 3].
    guard fields.count > 19, let parent = pid_t(String(decoding: fields[1], as: UTF8.self)),
      let start = UInt64(String(decoding: fields[19], as: UTF8.self))
    else { return nil }
    self.init(parent: parent, startTime: start)
  }
}

extension Sys {
  /// Process `pid`'s parent and start time, read from `/proc/PID/stat` to its end.
  /// - Throws: ENOENT or ESRCH (``Errno/noSuchProcess``) when there is no such process;
  ///   EINVAL when `pid` is not positive or the file cannot be parsed; any other error of
  ///   the open and the reads (EMFILE, ENOMEM…) as it came.
  public static func processStat(_ pid: pid_t) throws(Errno) -> ProcessStat {
    guard pid > 0 else { throw Errno.invalidArgument }
    guard let stat = ProcessStat(parsing: try readFile("/proc/\(pid)/stat")) else { throw Errno.invalidArgument }
    return stat
  }

  /// The pids of every process in `/proc` (this pid namespace's view).
  public static func processIDs() throws(Errno) -> [pid_t] {
    let stream = try DirectoryStream(fd: try openat(AT_FDCWD, "/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC))
    var pids: [pid_t] = []
    while let item = try stream.next() {
      if let pid = pid_t(String(cString: item.name)), pid > 0 { pids.append(pid) }
    }
    return pids
  }

  /// The inode numbers of the working and root directories inside `mountpoint` (absolute,
  /// no trailing slash) of the processes this one may see (another user's need
  /// CAP_SYS_PTRACE). Each `/proc/PID/cwd` link is read first, which touches no
  /// filesystem; only a directory inside the mount is then looked at, so a hung
  /// filesystem elsewhere holds nothing up.
  /// - Throws: when `/proc` cannot be listed (then no process's directories are known).
  public static func directoriesInUse(under mountpoint: String) throws(Errno) -> Set<UInt64> {
    let exact = Array(mountpoint.utf8)
    let prefix = exact + [UInt8(ascii: "/")]
    var found = Set<UInt64>()
    for pid in try processIDs() {
      for link in ["cwd", "root"] {
        let path = "/proc/\(pid)/\(link)"
        // Absent is the meaning: a process that has exited since the listing, or one whose
        // links this one may not read (another user's), has no directory this one can see.
        guard let target = try? readlink(AT_FDCWD, at: path), target == exact || target.starts(with: prefix),
          let st = try? statPath(path)
        else { continue }
        found.insert(UInt64(st.st_ino))
      }
    }
    return found
  }

  /// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): a descendant whose
  /// parent exits is re-parented to it instead of to init, so descendants stay in its tree.
  public static func becomeChildSubreaper() throws(Errno) {
    guard cposix_set_child_subreaper() == 0 else { throw Errno.current }
  }

  /// Lets go of what this process shares with whoever started it: standard input, output
  /// and error become `/dev/null` (so a pipe it was given reaches its end for the reader)
  /// and the working directory `/` (so no filesystem is kept busy by it).
  public static func detachFromCaller() throws(Errno) {
    let null = try open("/dev/null", O_RDWR)
    defer { close(null) }
    for fd: Int32 in 0...2 { try dup2(null, fd) }
    guard Glibc.chdir("/") == 0 else { throw Errno.current }
  }

  /// Marks `fd` close-on-exec, so that no program started from now on inherits it.
  public static func setCloseOnExec(_ fd: Int32) throws(Errno) {
    let flags = fcntl(fd, F_GETFD)
    guard flags >= 0, fcntl(fd, F_SETFD, flags | FD_CLOEXEC) == 0 else { throw Errno.current }
  }

  /// Ignores SIGHUP, SIGINT and SIGQUIT from now on, in this program and the one it
  /// becomes through ``replaceProgram(_:_:environment:)``: what a terminal sends to a
  /// process group, or a shell to its jobs when it exits.
  public static func ignoreHangupAndInterrupts() {
    for signal in [SIGHUP, SIGINT, SIGQUIT] { _ = Glibc.signal(signal, SIG_IGN) }
  }

  /// Replaces this process's program with `path` (`execve`): the same process (pid, start
  /// time, parent, children, child-subreaper setting), with only descriptors 0, 1 and 2
  /// left open.
  /// - Returns: only when it failed: why.
  public static func replaceProgram(_ path: String, _ arguments: [String], environment: [String]) -> Errno {
    do {
      for descriptor in try ownDescriptors() where descriptor.fd > 2 { try setCloseOnExec(descriptor.fd) }
    } catch {
      return error
    }
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
    defer { envp.forEach { free($0) } }
    execve(path, &argv, &envp)
    return Errno.current
  }

  /// Whether this process has a child, exited or not (`waitid` without waiting).
  public static var hasChildren: Bool {
    var info = siginfo_t()
    while waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 {
      if errno != EINTR { return false }  // ECHILD: none
    }
    return true
  }

  /// Reaps this process's children as they end, until it has none left (`ECHILD`): how a
  /// child subreaper waits for every process of its tree, re-parented ones included.
  public static func reapAllChildren() {
    while true {
      var status: Int32 = 0
      if waitpid(-1, &status, 0) < 0 && errno != EINTR { return }
    }
  }
}

extension Errno {
  /// ESRCH: no such process.
  public static let noSuchProcess = Errno(rawValue: ESRCH)
}
