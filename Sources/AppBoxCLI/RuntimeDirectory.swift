import Foundation
import Posix

/// Where a running mount keeps its pid file, log and control socket: a directory only its
/// owner can enter (`$XDG_RUNTIME_DIR/appbox`, else `/run/appbox` for root, else
/// `/tmp/appbox-UID`), one set of files per mountpoint.
struct RuntimeDirectory {
  let path: String

  /// This user's runtime directory, created (0700) if missing; refused unless it is a
  /// directory of this user's that no one else can write.
  static func current() throws(CLIError) -> RuntimeDirectory {
    let environment = ProcessInfo.processInfo.environment
    let uid = Sys.effectiveUID
    let path: String
    if let xdg = environment["XDG_RUNTIME_DIR"], xdg.hasPrefix("/") {
      path = xdg + "/appbox"
    } else if uid == 0 {
      path = "/run/appbox"
    } else {
      path = "/tmp/appbox-\(uid)"
    }
    do { try Sys.mkdir(path, 0o700) } catch {
      if error != .exists {
        throw CLIError(.osError, "cannot create the runtime directory \(path): \(error)")
      }
    }
    let st: stat
    do { st = try Sys.lstatPath(path) } catch {
      throw CLIError(.osError, "cannot read the runtime directory \(path): \(error)")
    }
    guard st.st_mode & S_IFMT == S_IFDIR, st.st_uid == uid else {
      throw CLIError(.noPermission, "the runtime directory \(path) is not a directory owned by you")
    }
    if st.st_mode & 0o077 != 0 {
      do { try Sys.chmod(path, 0o700) } catch {
        throw CLIError(.osError, "cannot make the runtime directory \(path) private: \(error)")
      }
    }
    return RuntimeDirectory(path: path)
  }

  /// The runtime directories a daemon run by `uid` uses without `XDG_RUNTIME_DIR`, or
  /// with the one a login session gives (`/run/user/UID`): where root looks for another
  /// user's daemon. Only those that `uid` owns and no one else may write are returned.
  static func standard(for uid: uid_t) -> [RuntimeDirectory] {
    var paths = ["/run/user/\(uid)/appbox", "/tmp/appbox-\(uid)"]
    if uid == 0 { paths.insert("/run/appbox", at: 0) }
    return paths.map(RuntimeDirectory.init(path:)).filter { $0.isPrivate(to: uid) }
  }

  /// Whether this directory is a real directory owned by `uid` that no one else may
  /// write (so a socket inside it was put there by `uid` or root).
  func isPrivate(to uid: uid_t) -> Bool {
    guard let st = try? Sys.lstatPath(path) else { return false }
    return st.st_mode & S_IFMT == S_IFDIR && st.st_uid == uid && st.st_mode & 0o022 == 0
  }

  /// How long the log and event log of a mount that is gone are kept.
  static let logLifetime: Double = 7 * 24 * 3600

  /// Removes the logs and event logs of mounts whose daemon is gone, last written more
  /// than ``logLifetime`` ago (a mount's own are kept while it runs, and for experiments
  /// after it). Best effort: what cannot be read or removed stays.
  func pruneOldLogs(now: Double = Clock.unix()) {
    guard let fd = try? Sys.openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
      let stream = try? DirectoryStream(fd: fd)
    else { return }
    var stale: [String] = []
    while let item = try? stream.next() {
      let name = String(cString: item.name)
      guard let dot = name.lastIndex(of: "."), [".log", ".events"].contains(String(name[dot...])) else { continue }
      let base = path + "/" + name[..<dot]
      let files = MountFiles(pid: base + ".pid", log: base + ".log", socket: base + ".sock", events: base + ".events")
      guard files.daemonPID == nil, let st = try? Sys.lstatPath(path + "/" + name),
        Double(st.st_mtim.tv_sec) < now - Self.logLifetime
      else { continue }
      stale.append(path + "/" + name)
    }
    for file in stale { try? Sys.unlink(file) }
  }

  /// The files of the mount at `mountpoint` (an absolute, resolved path).
  func files(for mountpoint: String) -> MountFiles {
    // FNV-1a over the path: short, stable names (Unix socket paths are limited to 108 bytes).
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in mountpoint.utf8 {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    let base = path + "/" + String(hash, radix: 16)
    return MountFiles(pid: base + ".pid", log: base + ".log", socket: base + ".sock", events: base + ".events")
  }
}

/// The runtime files of one mount.
struct MountFiles {
  let pid: String
  let log: String
  let socket: String
  let events: String

  /// The daemon's process id, if its pid file names a live process.
  var daemonPID: pid_t? {
    guard let bytes = try? Sys.readFile(pid),
      let value = pid_t(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
      value > 0, Spawn.isRunning(value)
    else { return nil }
    return value
  }
}
