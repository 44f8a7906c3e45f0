import Foundation
import Posix

/// Where a running mount keeps its pid file, log and control socket: a directory only its
/// owner can enter (`$XDG_RUNTIME_DIR/appbox`, else `/run/appbox` for root, else
/// `/tmp/appbox-UID`), one set of files per mountpoint. In `/tmp` anyone can take the
/// name first: when `/tmp/appbox-UID` is not a directory of the user's that no one else
/// may write, the user's files go to a private directory of their own,
/// `/tmp/appbox-UID-XXXXXX` (`mkdtemp`), which those who look for them find by that name
/// and the same checks (``isPrivate(to:)``).
struct RuntimeDirectory {
  let path: String

  /// This user's runtime directory, created (0700) if missing; refused unless it is a
  /// directory of this user's that no one else can write. In `/tmp`, where another user
  /// may have taken `/tmp/appbox-UID`, the user's own `/tmp/appbox-UID-XXXXXX` instead
  /// (the first there is, or a new one, with a notice on standard error).
  static func current() throws(CLIError) -> RuntimeDirectory {
    let environment = ProcessInfo.processInfo.environment
    let uid = Sys.effectiveUID
    let path: String
    if let xdg = environment["XDG_RUNTIME_DIR"], xdg.hasPrefix("/") {
      path = xdg + "/appbox"
    } else if uid == 0 {
      path = "/run/appbox"
    } else {
      return try shared(for: uid)
    }
    let directory = RuntimeDirectory(path: path)
    switch try directory.claim(for: uid) {
    case .ready: return directory
    case .notPrivate(let why):
      throw CLIError(.noPermission, "the runtime directory \(path) is not a directory owned by you (\(why))")
    }
  }

  /// `/tmp/appbox-UID` when it is `uid`'s and private, else `uid`'s own fallback.
  private static func shared(for uid: uid_t) throws(CLIError) -> RuntimeDirectory {
    let usual = RuntimeDirectory(path: "/tmp/appbox-\(uid)")
    let why: String
    switch try usual.claim(for: uid) {
    case .ready: return usual
    case .notPrivate(let reason): why = reason
    }
    if let fallback = fallbacks(for: uid).first { return fallback }
    let made: String
    do { made = try Sys.makeTemporaryDirectory(prefix: fallbackPrefix(for: uid)) } catch {
      throw CLIError(.osError, "cannot create a runtime directory in /tmp (\(usual.path) is \(why)): \(error)")
    }
    FileHandle.standardError.write(
      Data("appbox: \(usual.path) is \(why), so not safe to use: runtime files go to \(made) instead\n".utf8))
    return RuntimeDirectory(path: made)
  }

  /// What ``claim(for:)`` found.
  private enum Claim {
    /// A directory of the user's that no one else may write (made private if it was not).
    case ready
    /// Something else: what (for messages).
    case notPrivate(String)
  }

  /// Creates this directory (0700) for `uid` if it is missing, and says whether `uid` may
  /// use it: a real directory (not a symlink) that `uid` owns and no one else may write.
  /// One only others may read or search is made private.
  /// - Throws: when it can neither be created nor looked at.
  private func claim(for uid: uid_t) throws(CLIError) -> Claim {
    do { try Sys.mkdir(path, 0o700) } catch {
      if error != .exists {
        throw CLIError(.osError, "cannot create the runtime directory \(path): \(error)")
      }
    }
    let st: stat
    do { st = try Sys.lstatPath(path) } catch {
      throw CLIError(.osError, "cannot read the runtime directory \(path): \(error)")
    }
    guard st.st_mode & S_IFMT == S_IFDIR else { return .notPrivate("not a directory") }
    guard st.st_uid == uid else { return .notPrivate("owned by uid \(st.st_uid)") }
    // Writable by others once: what it holds may have been put there by them.
    guard st.st_mode & 0o022 == 0 else {
      return .notPrivate("writable by others (mode \(String(st.st_mode & 0o7777, radix: 8)))")
    }
    if st.st_mode & 0o077 != 0 {
      do { try Sys.chmod(path, 0o700) } catch {
        throw CLIError(.osError, "cannot make the runtime directory \(path) private: \(error)")
      }
    }
    return .ready
  }

  /// The beginning of the names of `uid`'s fallback directories in `/tmp`.
  static func fallbackPrefix(for uid: uid_t) -> String { "/tmp/appbox-\(uid)-" }

  /// `uid`'s fallback directories in `/tmp` (``current()``), by name: those of the form
  /// `/tmp/appbox-UID-XXXXXX` that are `uid`'s and private. None when `/tmp` cannot be
  /// listed (then nothing there can be trusted to be `uid`'s either).
  static func fallbacks(for uid: uid_t) -> [RuntimeDirectory] {
    let prefix = fallbackPrefix(for: uid)
    let name = String(prefix.dropFirst("/tmp/".count))
    guard let fd = try? Sys.openat(AT_FDCWD, "/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
      let stream = try? DirectoryStream(fd: fd)
    else { return [] }  // absent is the meaning: no directory there is known to be uid's
    var found: [RuntimeDirectory] = []
    while let item = try? stream.next() {
      let entry = String(cString: item.name)
      guard entry.hasPrefix(name), entry.count == name.count + 6 else { continue }
      let directory = RuntimeDirectory(path: "/tmp/" + entry)
      if directory.isPrivate(to: uid) { found.append(directory) }
    }
    return found.sorted { $0.path < $1.path }
  }

  /// The runtime directories a daemon run by `uid` uses without `XDG_RUNTIME_DIR`, or
  /// with the one a login session gives (`/run/user/UID`): where root looks for another
  /// user's daemon. Only those that `uid` owns and no one else may write are returned.
  static func standard(for uid: uid_t) -> [RuntimeDirectory] {
    var paths = ["/run/user/\(uid)/appbox", "/tmp/appbox-\(uid)"]
    if uid == 0 { paths.insert("/run/appbox", at: 0) }
    return paths.map(RuntimeDirectory.init(path:)).filter { $0.isPrivate(to: uid) } + fallbacks(for: uid)
  }

  /// Whether this directory is a real directory owned by `uid` that no one else may
  /// write (so a socket inside it was put there by `uid` or root).
  func isPrivate(to uid: uid_t) -> Bool {
    // Absent is the meaning: what cannot be looked at is not known to be uid's.
    guard let st = try? Sys.lstatPath(path) else { return false }
    return st.st_mode & S_IFMT == S_IFDIR && st.st_uid == uid && st.st_mode & 0o022 == 0
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
    guard let fd = try? Sys.openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
      let stream = try? DirectoryStream(fd: fd)
    else { return }
    var stale: [String] = []
    var logDirectories: [String] = []
    while let item = try? stream.next() {
      let name = String(cString: item.name)
      if name.hasSuffix(".events.d") {
        // A mountpoint's event logs (EventLogDirectory): pruned log by log, by age.
        let files = MountFiles(base: path + "/" + name.dropLast(".events.d".count))
        if case .success(nil) = Result(catching: { () throws(Errno) in try files.daemon() }) {
          logDirectories.append(path + "/" + name)
        }
        continue
      }
      guard let dot = name.lastIndex(of: "."), [".log", ".events"].contains(String(name[dot...])) else { continue }
      let files = MountFiles(base: path + "/" + name[..<dot])
      // A pid file that cannot be read may name a running daemon: its logs stay.
      guard case .success(nil) = Result(catching: { () throws(Errno) in try files.daemon() }),
        let st = try? Sys.lstatPath(path + "/" + name),
        Double(st.st_mtim.tv_sec) < now - Self.logLifetime
      else { continue }
      stale.append(path + "/" + name)
    }
    for file in stale { try? Sys.unlink(file) }
    for directory in logDirectories {
      EventLogDirectory(path: directory, owner: Sys.effectiveUID).removeStale(now: now)
    }
  }

  /// The files of the mount at `mountpoint` (an absolute, resolved path).
  func files(for mountpoint: String) -> MountFiles {
    // FNV-1a over the path: short, stable names (Unix socket paths are limited to 108 bytes).
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in mountpoint.utf8 {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    return MountFiles(base: path + "/" + String(hash, radix: 16))
  }
}

/// The runtime files of one mount.
struct MountFiles {
  let pid: String
  let log: String
  let socket: String
  /// The directory of the mountpoint's event logs, one per mount (EventLogDirectory).
  let eventLogs: String

  /// The files of the mount whose names start with `base` (`<runtime>/<hash>`).
  init(base: String) {
    pid = base + ".pid"
    log = base + ".log"
    socket = base + ".sock"
    eventLogs = base + ".events.d"
  }

  /// The daemon's process id, if its pid file names a live process. Nil also when the pid
  /// file cannot be read: a client then believes no peer (``ControlClient/verifyPeer(_:of:)``).
  var daemonPID: pid_t? { try? daemon() }

  /// The daemon's process id, if its pid file names a live process; nil when there is no
  /// pid file or it names none.
  /// - Throws: when the pid file is there but cannot be read.
  func daemon() throws(Errno) -> pid_t? {
    let bytes: [UInt8]
    do { bytes = try Sys.readFile(pid) } catch {
      if error == .noEntry { return nil }
      throw error
    }
    guard let value = pid_t(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
      value > 0, Spawn.isRunning(value)
    else { return nil }
    return value
  }
}
