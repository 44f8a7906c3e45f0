import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Runs programs as other users (uid = gid, no supplementary groups, a minimal environment
/// without root's runtime directory), and mounts owned by them.
enum OtherUser {
  /// The environment other users' commands get (plus what a test adds).
  static func environment(_ extra: [String: String] = [:]) -> [String: String] {
    ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"].merging(extra) { $1 }
  }

  /// `setpriv` arguments that run `arguments` as `uid`.
  static func setpriv(_ uid: uid_t, _ arguments: [String]) -> [String] {
    ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--"] + arguments
  }

  /// Runs `arguments` as `uid` to completion.
  static func run(_ uid: uid_t, _ arguments: [String], environment: [String: String] = [:]) throws -> CommandResult {
    try Command.run("/usr/bin/setpriv", setpriv(uid, arguments), environment: Self.environment(environment))
  }

  /// Starts `arguments` as `uid` in the background; the caller ends it with `terminate()`
  /// and `waitUntilExit()`.
  static func start(_ uid: uid_t, _ arguments: [String]) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    process.arguments = setpriv(uid, arguments)
    process.environment = environment()
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    return process
  }

  /// A device state read on the mount by `uid` (who can reach a mount without
  /// `allow_other`), or the errno name.
  static func deviceState(_ uid: uid_t, _ mountpoint: String) throws -> String {
    let script =
      "import os, sys\ntry: print(os.getxattr(sys.argv[1], 'user.appbox.device-state').decode())\nexcept OSError as e: print(e)"
    return try run(uid, ["/usr/bin/python3", "-c", script, mountpoint]).output.trimmingCharacters(
      in: .whitespacesAndNewlines)
  }
}

/// A sandbox mounted by another user with `appbox mount` (in a 0755 temporary root, with
/// a backing directory and mountpoint that user owns); unmounted by root at the end.
final class OtherUsersMount {
  let uid: uid_t
  let root: String
  var backing: String { root + "/backing" }
  var mountpoint: String { root + "/mnt" }
  /// Held while /dev/fuse is opened up for a mount.
  private static let deviceLock = NSLock()

  /// Runs `body` (a user's mount) with /dev/fuse open to every user. A user mounts FUSE
  /// through /dev/fuse (mode 0666 on Debian) and the set-user-ID fusermount3; where it is
  /// root's only, it is opened up for the mount and closed again (the daemon keeps the
  /// descriptor it opened). One at a time: suites run in parallel, and another's restore
  /// must not close it under this one's mount.
  static func withFUSEDeviceOpen<T>(_ body: () throws -> T) throws -> T {
    deviceLock.lock()
    defer { deviceLock.unlock() }
    var device = stat()
    try check(stat("/dev/fuse", &device), "stat /dev/fuse")
    let mode = device.st_mode & 0o7777
    if mode & 0o006 != 0o006 { try check(chmod("/dev/fuse", 0o666), "chmod /dev/fuse") }
    defer { if mode & 0o006 != 0o006 { chmod("/dev/fuse", mode) } }
    return try body()
  }

  /// Mounts as `uid` with `arguments`; `environment` adds to the user's (e.g. an
  /// `XDG_RUNTIME_DIR`).
  init(uid: uid_t, arguments: [String] = [], environment: [String: String] = [:]) throws {
    self.uid = uid
    var template = Array("/tmp/appbox-other-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw SyscallError(call: "mkdtemp", code: errno) }
    root = String(cString: made)
    try check(chmod(root, 0o755), "chmod")
    for directory in [backing, mountpoint] {
      try check(mkdir(directory, 0o755), "mkdir \(directory)")
      try check(chown(directory, uid, uid), "chown \(directory)")
    }
    let result = try Self.withFUSEDeviceOpen {
      try OtherUser.run(
        uid, [Command.appbox, "mount", "--backing", backing] + arguments + [mountpoint], environment: environment)
    }
    guard result.status == 0, MountFixture.isMounted(mountpoint) else {
      throw FixtureError("appbox mount as uid \(uid) exited \(result.status): \(result.error)")
    }
  }

  deinit {
    if MountFixture.isMounted(mountpoint) { _ = try? Command.run("/usr/bin/fusermount3", ["-uz", mountpoint]) }
    _ = try? FileManager.default.removeItem(atPath: root)
  }
}

/// A fake control server: a program of `uid` listening on `socket` that answers every
/// request with `reply`, and that writes `events` (if given) next to it, as a user who
/// wants to fool root's `appbox` would.
final class FakeControlServer {
  let process: Process
  let socket: String

  init(uid: uid_t, socket: String, reply: String, events: String? = nil) throws {
    let script = """
      import os, socket, sys
      path, reply, events = sys.argv[1], sys.argv[2], sys.argv[3]
      os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
      if events:
          os.makedirs(os.path.dirname(events), mode=0o700, exist_ok=True)
          with open(events, 'w') as f:
              f.write('{"type":"state","time":1,"from":"UNLOCKED","to":"FAKE"}\\n')
      try:
          os.unlink(path)
      except FileNotFoundError:
          pass
      s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
      s.bind(path + '.tmp')
      s.listen(8)
      os.rename(path + '.tmp', path)
      while True:
          c, _ = s.accept()
          c.recv(65536)
          c.sendall(reply.encode() + b'\\n')
          c.close()
      """
    self.socket = socket
    process = try OtherUser.start(uid, ["/usr/bin/python3", "-c", script, socket, reply, events ?? ""])
    let deadline = Date().addingTimeInterval(10)
    var st = stat()
    while lstat(socket, &st) != 0 || st.st_mode & S_IFMT != S_IFSOCK {
      guard Date() < deadline, process.isRunning else { throw FixtureError("the fake server did not start") }
      usleep(10_000)
    }
  }

  /// Ends the server (by its pid; SIGKILL, since a child of a test thread starts with
  /// the thread's signals blocked).
  func stop() {
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
  }

  deinit { stop() }
}
