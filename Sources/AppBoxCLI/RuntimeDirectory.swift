import Foundation
import Posix

/// Where a running mount keeps its pid file, log, event log and control socket: a directory
/// only its owner can enter (`$XDG_RUNTIME_DIR/appbox`, else `/run/appbox` for root, else
/// `/tmp/appbox-UID`), one set of files per mountpoint (``MountFiles``).
///
/// It is opened once, after checks that no one but its owner and root can have put it or
/// anything in it there (``open(_:for:create:)``: every directory on its path belongs to
/// root or the owner, and one that others may write has the sticky bit), and every file in
/// it is reached through that descriptor with `*at()` calls that follow no symlink: a
/// directory renamed or replaced after the checks changes nothing. In `/tmp` anyone can
/// take the name first: when `/tmp/appbox-UID` is not a directory of the user's that no one
/// else may write, the user's files go to a private directory of their own,
/// `/tmp/appbox-UID-XXXXXX` (`mkdtemp`), which those who look for them find by that name
/// and the same checks. An `XDG_RUNTIME_DIR` that is not safe to use (another user's, as
/// after `su` without `-`, or below a directory others may write) is passed over for the
/// directory the user would have without it, with a notice.
final class RuntimeDirectory: Sendable {
  /// Its path, for messages and for what is named to others (`APPBOX_EVENTS`); nothing is
  /// opened by it after ``open(_:for:create:)``.
  let path: String
  /// The directory, open (`O_PATH`) since it was checked: every runtime file is reached
  /// through it. Closed when this object goes (a daemon keeps it for its life).
  let fd: Int32
  /// Its owner: the user whose runtime files it holds (the only one, with root, who can
  /// put anything in it).
  let owner: uid_t

  init(path: String, fd: Int32, owner: uid_t) {
    self.path = path
    self.fd = fd
    self.owner = owner
  }

  deinit { Sys.close(fd) }

  /// This user's runtime directory, created (0700) if missing (``open(_:for:create:)``).
  /// - Parameters:
  ///   - environment: where `XDG_RUNTIME_DIR` is read.
  ///   - uid: the user (this process's effective one).
  ///   - notice: where a notice goes when the usual directory is not used (standard error).
  static func current(
    environment: [String: String] = ProcessInfo.processInfo.environment, uid: uid_t = Sys.effectiveUID,
    notice: (String) -> Void = { FileHandle.standardError.write(Data("appbox: \($0)\n".utf8)) }
  ) throws(CLIError) -> RuntimeDirectory {
    if let xdg = environment["XDG_RUNTIME_DIR"], xdg.hasPrefix("/") {
      let path = xdg + (xdg.hasSuffix("/") ? "" : "/") + "appbox"
      let why: String
      switch try open(path, for: uid, create: true) {
      case .opened(let directory): return directory
      case .missing:
        throw CLIError(.osError, "cannot create the runtime directory \(path): XDG_RUNTIME_DIR does not exist")
      case .unsafe(let reason), .unsafeParent(let reason): why = reason
      }
      let instead = try usual(for: uid, notice: notice)
      notice("\(path) is not safe for runtime files (\(why)): they go to \(instead.path) instead")
      return instead
    }
    return try usual(for: uid, notice: notice)
  }

  /// The directory `uid` has without `XDG_RUNTIME_DIR`: `/run/appbox` for root, else
  /// `/tmp/appbox-UID` when it is `uid`'s and private, else `uid`'s own fallback.
  private static func usual(for uid: uid_t, notice: (String) -> Void) throws(CLIError) -> RuntimeDirectory {
    if uid == 0 {
      let path = "/run/appbox"
      switch try open(path, for: uid, create: true) {
      case .opened(let directory): return directory
      case .missing: throw CLIError(.osError, "cannot create the runtime directory \(path): /run does not exist")
      case .unsafe(let why), .unsafeParent(let why):
        throw CLIError(.noPermission, "the runtime directory \(path) is not safe to use (\(why))")
      }
    }
    let usual = "/tmp/appbox-\(uid)"
    let why: String
    switch try open(usual, for: uid, create: true) {
    case .opened(let directory): return directory
    case .missing: throw CLIError(.osError, "cannot create the runtime directory \(usual): /tmp does not exist")
    case .unsafeParent(let reason):
      throw CLIError(
        .noPermission,
        "no safe runtime directory in /tmp (\(reason)): set XDG_RUNTIME_DIR to a private directory of yours")
    case .unsafe(let reason): why = reason
    }
    if let fallback = try fallbacks(for: uid).first { return fallback }
    let made: String
    do { made = try Sys.makeTemporaryDirectory(prefix: fallbackPrefix(for: uid)) } catch {
      throw CLIError(.osError, "cannot create a runtime directory in /tmp (\(usual) is \(why)): \(error)")
    }
    guard case .opened(let directory) = try open(made, for: uid, create: false) else {
      throw CLIError(.osError, "the runtime directory \(made) just made is not private to uid \(uid)")
    }
    notice("\(usual) is \(why), so not safe to use: runtime files go to \(made) instead")
    return directory
  }

  /// The beginning of the names of `uid`'s fallback directories in `/tmp`.
  static func fallbackPrefix(for uid: uid_t) -> String { "/tmp/appbox-\(uid)-" }

  /// `uid`'s fallback directories in `/tmp` (``current(environment:uid:notice:)``), by
  /// name: those of the form `/tmp/appbox-UID-XXXXXX` that are `uid`'s and private, opened.
  /// None when `/tmp` cannot be listed (then nothing there can be trusted to be `uid`'s).
  static func fallbacks(for uid: uid_t) throws(CLIError) -> [RuntimeDirectory] {
    let prefix = fallbackPrefix(for: uid)
    let name = String(prefix.dropFirst("/tmp/".count))
    guard let fd = try? Sys.openat(AT_FDCWD, "/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
      let stream = try? DirectoryStream(fd: fd)
    else { return [] }  // absent is the meaning: no directory there is known to be uid's
    var names: [String] = []
    // A listing that fails part-way is refused, not taken as complete: a directory missed
    // would make `current()` start another one, and clients miss the daemon's files.
    do throws(Errno) {
      while let item = try stream.next() {
        let entry = String(cString: item.name)
        if entry.hasPrefix(name), entry.count == name.count + 6 { names.append(entry) }
      }
    } catch {
      throw CLIError(.osError, "cannot list /tmp for the runtime directory: \(error)")
    }
    var found: [RuntimeDirectory] = []
    for entry in names.sorted() {
      if case .opened(let directory) = try open("/tmp/" + entry, for: uid, create: false) { found.append(directory) }
    }
    return found
  }

  /// The runtime directories a daemon run by `uid` uses without `XDG_RUNTIME_DIR`, or
  /// with the one a login session gives (`/run/user/UID`): where root looks for another
  /// user's daemon. Only those that pass ``open(_:for:create:)`` for `uid`, opened.
  static func standard(for uid: uid_t) throws(CLIError) -> [RuntimeDirectory] {
    var paths = ["/run/user/\(uid)/appbox", "/tmp/appbox-\(uid)"]
    if uid == 0 { paths.insert("/run/appbox", at: 0) }
    var found: [RuntimeDirectory] = []
    for path in paths {
      if case .opened(let directory) = try open(path, for: uid, create: false) { found.append(directory) }
    }
    return found + (try fallbacks(for: uid))
  }

  /// How long the log and event logs of a mount that is gone are kept.
  static let logLifetime: Double = EventLogDirectory.retention.lifetime

  /// Removes the logs and event logs of mounts whose daemon is gone, last written more
  /// than ``logLifetime`` ago (a mount's own are kept while it runs, and for experiments
  /// after it; `.events` files are the single event logs of earlier versions). Best
  /// effort: what cannot be read or removed stays.
  func pruneOldLogs(now: Double = Clock.unix()) {
    // Absent is the meaning of each `try?` here: what cannot be listed, read or removed is
    // not known to be stale, and stays.
    guard let listing = try? Sys.openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
      let stream = try? DirectoryStream(fd: listing)
    else { return }
    var stale: [String] = []
    var logDirectories: [MountFiles] = []
    while let item = try? stream.next() {
      let name = String(cString: item.name)
      if name.hasSuffix(".events.d") {
        // A mountpoint's event logs (EventLogDirectory): pruned log by log, by age.
        let files = MountFiles(directory: self, base: String(name.dropLast(".events.d".count)))
        if case .success(nil) = Result(catching: { () throws(Errno) in try files.daemon() }) {
          logDirectories.append(files)
        }
        continue
      }
      guard let dot = name.lastIndex(of: "."), [".log", ".events"].contains(String(name[dot...])) else { continue }
      let files = MountFiles(directory: self, base: String(name[..<dot]))
      // A pid file that cannot be read may name a running daemon: its logs stay.
      guard case .success(nil) = Result(catching: { () throws(Errno) in try files.daemon() }),
        let st = try? Sys.fstatat(fd, name, AT_SYMLINK_NOFOLLOW),
        Double(st.st_mtim.tv_sec) < now - Self.logLifetime
      else { continue }
      stale.append(name)
    }
    for name in stale { try? Sys.unlinkat(fd, name, 0) }
    for files in logDirectories { EventLogDirectory(files, owner: owner).removeStale(now: now) }
  }

  /// The files of the mount at `mountpoint` (an absolute, resolved path).
  func files(for mountpoint: String) -> MountFiles {
    // FNV-1a over the path: short, stable names (Unix socket paths are limited to 108 bytes).
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in mountpoint.utf8 {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    return MountFiles(directory: self, base: String(hash, radix: 16))
  }
}
