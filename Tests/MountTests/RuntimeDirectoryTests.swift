import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The runtime directory does not keep every old mount's logs forever.
@Suite("Runtime directory", .needsFUSE, .timeLimit(.minutes(10)))
struct RuntimeDirectoryTests {
  @Test("a mount removes logs of mounts that are gone, older than a week; newer ones and running mounts' stay")
  func oldLogsArePruned() throws {
    guard let xdg = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] else {
      throw FixtureError("XDG_RUNTIME_DIR is not set (scripts/test.sh sets it)")
    }
    let directory = xdg + "/appbox"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let tag = "prune\(getpid())"
    let old = ["\(tag)-old.log", "\(tag)-old.events"]
    let kept = ["\(tag)-new.log", "\(tag)-running.log"]
    for name in old + kept { try writeFile(directory + "/" + name, bytes("x")) }
    try writeFile(directory + "/\(tag)-running.pid", bytes("\(getpid())\n"))  // a live process
    let eightDaysAgo = Date().addingTimeInterval(-8 * 24 * 3600)
    for name in old + ["\(tag)-running.log"] {
      try FileManager.default.setAttributes([.modificationDate: eightDaysAgo], ofItemAtPath: directory + "/" + name)
    }
    let fixture = try MountFixture()
    for name in old { #expect(!FileManager.default.fileExists(atPath: directory + "/" + name), "\(name) kept") }
    for name in kept { #expect(FileManager.default.fileExists(atPath: directory + "/" + name), "\(name) removed") }
    for name in kept + ["\(tag)-running.pid"] { try? FileManager.default.removeItem(atPath: directory + "/" + name) }
    try fixture.unmount()
  }
}

/// Another user cannot take a user's runtime directory in `/tmp` (`/tmp/appbox-UID`, where
/// a user without `XDG_RUNTIME_DIR` keeps a mount's socket) to deny them their mounts:
/// the mount goes to a private directory of its own, which the user and root find, and
/// neither believes a socket the squatter planted.
@Suite("Runtime directory taken by another user", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct RuntimeDirectorySquattingTests {
  /// The user whose directory is taken: one with an account (fusermount3 wants a user
  /// name), that no other test uses (they use nobody, 65534).
  static let victim: uid_t = {
    for uid: uid_t in [5, 6, 7, 8, 9, 10, 13, 34, 38, 39] where getpwuid(uid) != nil { return uid }
    return 24680  // no such account: the mount fails, and says so
  }()
  /// The user who takes it.
  static let squatter: uid_t = 13579
  static var usual: String { "/tmp/appbox-\(victim)" }

  /// Removes the victim's runtime directories in `/tmp` (an earlier run's).
  static func clear() {
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
    where entry == "appbox-\(victim)" || entry.hasPrefix("appbox-\(victim)-") {
      try? FileManager.default.removeItem(atPath: "/tmp/" + entry)
    }
  }

  /// How the squatter takes `/tmp/appbox-UID`.
  enum Squat: String, CaseIterable {
    /// A directory of the squatter's that anyone may write.
    case directory
    /// A file.
    case file
    /// A symlink to a private directory of the victim's.
    case symlink
    /// The victim's own directory, writable by others (who may have put links in it).
    case writable
  }

  @Test(
    "/tmp/appbox-UID taken: the mount uses the owner's own private directory, found by the owner and root, not the squatter's sockets",
    arguments: Squat.allCases)
  func squatted(_ squat: Squat) throws {
    Self.clear()
    defer { Self.clear() }
    var target: String?
    switch squat {
    case .directory:
      let made = try OtherUser.run(Self.squatter, ["/bin/mkdir", "-m", "0777", Self.usual])
      try #require(made.status == 0, "\(made.error)")
    case .file:
      let made = try OtherUser.run(Self.squatter, ["/usr/bin/touch", Self.usual])
      try #require(made.status == 0, "\(made.error)")
    case .writable:
      try check(mkdir(Self.usual, 0o777), "mkdir")
      try check(chmod(Self.usual, 0o777), "chmod")
      try check(chown(Self.usual, Self.victim, Self.victim), "chown")
    case .symlink:
      var template = Array("/tmp/appbox-squat-target-XXXXXX".utf8CString)
      target = String(cString: try #require(mkdtemp(&template)))
      try check(chown(target!, Self.victim, Self.victim), "chown")
      let made = try OtherUser.run(Self.squatter, ["/bin/ln", "-s", target!, Self.usual])
      try #require(made.status == 0, "\(made.error)")
    }
    defer { if let target { try? FileManager.default.removeItem(atPath: target) } }

    let mount = try OtherUsersMount(uid: Self.victim, arguments: ["--unlocked", "--grace", "0"])
    let socketName = ControlFiles.name(for: mount.mountpoint, "sock")
    let fallbacks = try FileManager.default.contentsOfDirectory(atPath: "/tmp").filter {
      $0.hasPrefix("appbox-\(Self.victim)-")
    }
    #expect(fallbacks.count == 1, "\(fallbacks)")
    let fallback = "/tmp/" + (fallbacks.first ?? "?")
    let st = try statPath(fallback)
    #expect(st.st_uid == Self.victim && st.st_mode & 0o777 == 0o700, "\(fallback): \(st.st_uid) \(st.st_mode)")
    #expect(FileManager.default.fileExists(atPath: fallback + "/" + socketName))

    // The squatter's fake daemons, where the squatter may write: in the directory it took,
    // and in a directory named like a fallback.
    var fakes: [FakeControlServer] = []
    let reply = #"{"ok":true,"state":"LOCKED","files":0,"bytes":0}"#
    if squat == .directory {
      fakes.append(try FakeControlServer(uid: Self.squatter, socket: Self.usual + "/" + socketName, reply: reply))
    }
    let planted = "/tmp/appbox-\(Self.victim)-aaaaaa/" + socketName
    fakes.append(try FakeControlServer(uid: Self.squatter, socket: planted, reply: reply))
    defer { fakes.forEach { $0.stop() } }

    // The owner controls the mount.
    let lock = try OtherUser.run(Self.victim, [Command.appbox, "lock", mount.mountpoint])
    #expect(lock.status == 0, "\(lock.error)")
    #expect(try OtherUser.deviceState(Self.victim, mount.mountpoint) == "LOCKED")
    // Root finds the owner's daemon too, not the fakes.
    let unlock = try Command.run(Command.appbox, ["unlock", mount.mountpoint])
    #expect(unlock.status == 0, "\(unlock.error)")
    #expect(try OtherUser.deviceState(Self.victim, mount.mountpoint) == "UNLOCKED")
    let status = try Command.run(Command.appbox, ["status", "--json", mount.mountpoint])
    #expect(status.status == 0 && status.output.contains(mount.backing), "\(status.error)")
    let unmount = try Command.run(Command.appbox, ["unmount", mount.mountpoint])
    #expect(unmount.status == 0, "\(unmount.error)")
    #expect(!MountFixture.isMounted(mount.mountpoint))
  }
}

/// Root's daemon never keeps its runtime files where another user can redirect them: not
/// below a directory of another user's (an `XDG_RUNTIME_DIR` kept by `su` without `-`),
/// and, once its directory is open, not wherever its path leads later.
@Suite("Runtime directory: paths others control", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct RuntimeDirectoryPathTests {
  /// The environment with `XDG_RUNTIME_DIR` set to `runtime`.
  static func environment(_ runtime: String) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["XDG_RUNTIME_DIR"] = runtime
    return environment
  }

  @Test("root with another user's XDG_RUNTIME_DIR keeps no runtime file there, and still controls the mount")
  func foreignRuntimeDirectory() throws {
    let directories = try SandboxDirectories()
    let foreign = directories.root + "/u5rt"
    try check(mkdir(foreign, 0o700), "mkdir")
    try check(chown(foreign, RuntimeDirectorySquattingTests.victim, RuntimeDirectorySquattingTests.victim), "chown")
    try check(chmod(directories.root, 0o755), "chmod")
    let environment = Self.environment(foreign)
    let mount = try Command.run(
      Command.appbox, ["mount", "--unlocked", "--backing", directories.backing, directories.mountpoint],
      environment: environment)
    defer {
      if MountFixture.isMounted(directories.mountpoint) {
        _ = try? Command.run("/usr/bin/fusermount3", ["-uz", directories.mountpoint])
      }
      unlink("/run/appbox/" + ControlFiles.name(for: directories.mountpoint, "log"))
      _ = try? FileManager.default.removeItem(  // best effort: the test's own logs
        atPath: "/run/appbox/" + ControlFiles.name(for: directories.mountpoint, "events.d"))
    }
    #expect(mount.status == 0, "\(mount.error)")
    #expect(mount.error.contains("not safe for runtime files"), "\(mount.error)")
    #expect(
      !FileManager.default.fileExists(atPath: foreign + "/appbox"), "root's runtime files went below uid 5's directory")
    #expect(
      FileManager.default.fileExists(atPath: "/run/appbox/" + ControlFiles.name(for: directories.mountpoint, "sock")))
    let lock = try Command.run(Command.appbox, ["lock", directories.mountpoint], environment: environment)
    #expect(lock.status == 0, "\(lock.error)")
    let unmount = try Command.run(Command.appbox, ["unmount", directories.mountpoint], environment: environment)
    #expect(unmount.status == 0, "\(unmount.error)")
  }

  @Test(
    "the runtime directory renamed and replaced by a symlink while the daemon runs: it removes its own files, no others"
  )
  func swappedWhileRunning() throws {
    let directories = try SandboxDirectories()
    let runtime = directories.root + "/runtime"
    try check(mkdir(runtime, 0o700), "mkdir")
    let environment = Self.environment(runtime)
    let mount = try Command.run(
      Command.appbox, ["mount", "--unlocked", "--backing", directories.backing, directories.mountpoint],
      environment: environment)
    defer {
      if MountFixture.isMounted(directories.mountpoint) {
        _ = try? Command.run("/usr/bin/fusermount3", ["-uz", directories.mountpoint])
      }
    }
    try #require(mount.status == 0, "\(mount.error)")
    let pidName = ControlFiles.name(for: directories.mountpoint, "pid")
    let socketName = ControlFiles.name(for: directories.mountpoint, "sock")
    let pidText = String(decoding: try readFile(runtime + "/appbox/" + pidName), as: UTF8.self)
    let daemon = try #require(pid_t(pidText.trimmingCharacters(in: .whitespacesAndNewlines)))
    // What another user who could rename it would do: their directory, with files of the
    // same names, in its place.
    let evil = runtime + "/evil"
    try check(mkdir(evil, 0o755), "mkdir")
    for name in [pidName, socketName] { try writeFile(evil + "/" + name, bytes("victim\n")) }
    try check(rename(runtime + "/appbox", runtime + "/appbox.x"), "rename")
    try check(symlink(evil, runtime + "/appbox"), "symlink")

    let unmount = try Command.run("/usr/bin/fusermount3", ["-u", directories.mountpoint])
    #expect(unmount.status == 0, "\(unmount.error)")
    #expect(MountFixtureWait.until(seconds: 30) { kill(daemon, 0) != 0 }, "the daemon did not exit")
    for name in [pidName, socketName] {
      #expect(FileManager.default.fileExists(atPath: evil + "/" + name), "the daemon removed \(evil)/\(name)")
      #expect(!FileManager.default.fileExists(atPath: runtime + "/appbox.x/" + name), "its own \(name) stayed")
    }
  }
}
