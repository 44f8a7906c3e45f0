import Foundation
import Posix

/// The runtime files of one mount in its runtime directory: `BASE.pid`, `BASE.log`,
/// `BASE.sock` and the event log directory `BASE.events.d` (``EventLogDirectory``), BASE a
/// hash of the mountpoint. Each is reached through
/// the directory's descriptor (``RuntimeDirectory/fd``) with `*at()` calls that follow no
/// symlink: a new file is created exclusively, one appended to must be a regular file of
/// this user's with one link, one read must be a regular file of the directory's owner
/// (opened without blocking, so a FIFO put in its place holds no reader up).
struct MountFiles {
  /// The directory holding them.
  let directory: RuntimeDirectory
  /// The names' common part.
  let base: String

  /// The pid file's name in the directory.
  var pidName: String { base + ".pid" }
  /// The daemon log's name.
  var logName: String { base + ".log" }
  /// The control socket's name.
  var socketName: String { base + ".sock" }
  /// The event log directory's name.
  var eventLogsName: String { base + ".events.d" }

  /// The pid file's path (for messages).
  var pid: String { directory.path + "/" + pidName }
  /// The daemon log's path (for messages).
  var log: String { directory.path + "/" + logName }
  /// The control socket's path (for messages).
  var socket: String { directory.path + "/" + socketName }
  /// The event log directory's path: for messages, and for programs told where a log is
  /// (`APPBOX_EVENTS`), which check what they open there.
  var eventLogs: String { directory.path + "/" + eventLogsName }
  /// The event log directory through the runtime directory's descriptor
  /// (`/proc/self/fd/N/BASE.events.d`), by which the daemon and readers open it: no rename
  /// of a directory on the runtime directory's path redirects it.
  var eventLogsThroughDirectory: String { UnixSocket.address(in: directory.fd, eventLogsName) }

  // MARK: - The daemon's pid file

  /// The daemon's process id, if its pid file names a live process. Nil also when the pid
  /// file cannot be read or is not the owner's: a client then believes no peer
  /// (``ControlClient/verifyPeer(_:of:)``).
  var daemonPID: pid_t? { try? daemon() }  // absent is the meaning: no peer to believe

  /// The daemon's process id, if its pid file names a live process; nil when there is no
  /// pid file or it names none.
  /// - Throws: when the pid file is there but cannot be read, or is not a regular file of
  ///   the directory's owner (EPERM).
  func daemon() throws(Errno) -> pid_t? {
    guard let fd = try openForReading(pidName) else { return nil }
    defer { Sys.close(fd) }
    let bytes = try Sys.readToEnd(fd, limit: 64)
    guard let value = pid_t(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
      value > 0, Spawn.isRunning(value)
    else { return nil }
    return value
  }

  /// Writes the pid file (mode 0644), replacing it in one step.
  func writePID(_ pid: pid_t) throws(Errno) {
    try Sys.replaceFile(in: directory.fd, pidName, with: Array("\(pid)\n".utf8), mode: 0o644)
  }

  // MARK: - Logs

  /// Opens the daemon log for appending: created (0600), or one that is there already if
  /// it is a regular file of this process's user with one link (nothing else can have been
  /// put in the directory; this checks it all the same).
  /// - Throws: a message when it cannot be opened or is not such a file.
  func openLog() throws(CLIError) -> Int32 {
    let fd: Int32
    do {
      fd = try Sys.openat(
        directory.fd, logName, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
    } catch {
      throw CLIError(.osError, "cannot open the daemon's log \(log): \(error)")
    }
    let st: stat
    do { st = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw CLIError(.osError, "cannot look at the daemon's log \(log): \(error)")
    }
    guard st.st_mode & S_IFMT == S_IFREG, st.st_uid == Sys.effectiveUID, st.st_nlink == 1 else {
      Sys.close(fd)
      throw CLIError(
        .noPermission,
        "\(log) is not a log of this user's (a \(Self.kind(st)) of uid \(st.st_uid) with \(st.st_nlink) links): not used"
      )
    }
    return fd
  }

  /// Opens the file `name` for reading, if it is there: it must be a regular file of the
  /// directory's owner (a FIFO, a device or a symlink put in its place is refused, and
  /// opening one blocks nothing: `O_NONBLOCK`, which a regular file ignores).
  /// - Returns: nil when there is no such file.
  /// - Throws: EPERM when it is not such a file; the open's or `fstat`'s error.
  func openForReading(_ name: String) throws(Errno) -> Int32? {
    let fd: Int32
    do { fd = try Sys.openat(directory.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) } catch {
      if error == .noEntry { return nil }
      // O_NOFOLLOW on a symlink: ELOOP. Not the owner's file either.
      throw error == .tooManySymlinks ? Errno.notPermitted : error
    }
    let st: stat
    do { st = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw error
    }
    guard st.st_mode & S_IFMT == S_IFREG, st.st_uid == directory.owner else {
      Sys.close(fd)
      throw Errno.notPermitted
    }
    return fd
  }

  /// What kind of file `st` describes, for messages.
  static func kind(_ st: stat) -> String {
    switch st.st_mode & S_IFMT {
    case S_IFREG: return "regular file"
    case S_IFDIR: return "directory"
    case S_IFLNK: return "symlink"
    case S_IFIFO: return "FIFO"
    case S_IFSOCK: return "socket"
    default: return "device"
    }
  }

  // MARK: - The socket

  /// The status of the socket file, if there is one (not followed if a symlink).
  func socketStatus() -> stat? {
    try? Sys.fstatat(directory.fd, socketName, AT_SYMLINK_NOFOLLOW)  // absent is the meaning: no socket here
  }

  /// Listens on the control socket (replacing a stale one).
  func listen() throws(Errno) -> Int32 { try UnixSocket.listen(in: directory.fd, socketName) }

  /// Connects to the control socket.
  func connect() throws(Errno) -> Int32 { try UnixSocket.connect(in: directory.fd, socketName) }

  // MARK: - Removal

  /// Removes the file `name` (not followed if a symlink).
  func remove(_ name: String) throws(Errno) { try Sys.unlinkat(directory.fd, name, 0) }
}
