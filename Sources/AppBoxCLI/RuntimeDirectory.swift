import Foundation
import Posix

/// Where a running mount keeps its pid file, log and control socket: a directory only its
/// owner can enter (`$XDG_RUNTIME_DIR/appbox`, else `/run/appbox` for root, else
/// `/tmp/appbox-UID`), one set of files per mountpoint.
struct RuntimeDirectory {
  let path: String

  static func current() throws(CLIError) -> RuntimeDirectory {
    let environment = ProcessInfo.processInfo.environment
    let path: String
    if let xdg = environment["XDG_RUNTIME_DIR"], xdg.hasPrefix("/") {
      path = xdg + "/appbox"
    } else if geteuid() == 0 {
      path = "/run/appbox"
    } else {
      path = "/tmp/appbox-\(geteuid())"
    }
    if mkdir(path, 0o700) != 0 && errno != EEXIST {
      throw CLIError(.osError, "cannot create the runtime directory \(path): \(String(cString: strerror(errno)))")
    }
    var st = stat()
    guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_uid == geteuid() else {
      throw CLIError(.noPermission, "the runtime directory \(path) is not a directory owned by you")
    }
    if st.st_mode & 0o077 != 0 { chmod(path, 0o700) }
    return RuntimeDirectory(path: path)
  }

  /// For root controlling another user's mount: that user's runtime files, found in the
  /// places any user's daemon would use.
  static func othersFiles(for mountpoint: String) -> MountFiles? {
    var candidates: [String] = []
    for base in ["/run/user", "/tmp"] {
      let entries = (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []
      for entry in entries {
        if base == "/run/user" { candidates.append("\(base)/\(entry)/appbox") }
        if base == "/tmp" && entry.hasPrefix("appbox-") { candidates.append("\(base)/\(entry)") }
      }
    }
    return candidates.lazy.map { RuntimeDirectory(path: $0).files(for: mountpoint) }.first {
      access($0.socket, F_OK) == 0
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
    guard let text = try? String(contentsOfFile: pid, encoding: .utf8),
      let value = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)), value > 0, Spawn.isRunning(value)
    else { return nil }
    return value
  }
}
