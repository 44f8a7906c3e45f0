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
  /// - Throws: ENOENT (or ESRCH) when there is no such process; EINVAL when the file
  ///   cannot be parsed.
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
  public static func directoriesInUse(under mountpoint: String) -> Set<UInt64> {
    let exact = Array(mountpoint.utf8)
    let prefix = exact + [UInt8(ascii: "/")]
    var found = Set<UInt64>()
    for pid in (try? processIDs()) ?? [] {
      for link in ["cwd", "root"] {
        let path = "/proc/\(pid)/\(link)"
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

  /// Whether this process has a child, exited or not (`waitid` without waiting).
  public static var hasChildren: Bool {
    var info = siginfo_t()
    while waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 {
      if errno != EINTR { return false }  // ECHILD: none
    }
    return true
  }
}
