import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Root controlling another user's mount talks to that mount's daemon, never to a socket
/// a third user planted: the mount table names the owner, the socket must be in the
/// owner's private runtime directory, and the peer must be the owner's daemon.
@Suite("Control channel: whose daemon answers", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct ControlVerificationTests {
  /// The mount's owner.
  static let owner: uid_t = 65534
  /// The third user, who plants fake sockets.
  static let intruder: uid_t = 12345
  /// The intruder's login-session runtime directory (as logind would make it).
  static let intruderRun = "/run/user/\(intruder)"

  /// Makes `/run/user/12345` for the intruder; removed by the returned closure.
  static func intruderRuntimeDirectory() throws -> () -> Void {
    _ = try? FileManager.default.removeItem(atPath: intruderRun)  // left by an interrupted run
    // A container has no logind, hence no /run/user.
    try FileManager.default.createDirectory(atPath: "/run/user", withIntermediateDirectories: true)
    try check(mkdir(intruderRun, 0o700), "mkdir \(intruderRun)")
    try check(chown(intruderRun, intruder, intruder), "chown \(intruderRun)")
    return { _ = try? FileManager.default.removeItem(atPath: intruderRun) }
  }

  /// The fake's socket path for `mountpoint` in the intruder's runtime directory.
  static func fakeSocket(_ mountpoint: String) -> String {
    intruderRun + "/appbox/" + ControlFiles.name(for: mountpoint, "sock")
  }

  @Test("root's lock, unlock and events reach the owner's daemon, not a fake socket of a third user")
  func rootReachesTheOwnersDaemon() throws {
    let removeRuntime = try Self.intruderRuntimeDirectory()
    defer { removeRuntime() }
    let mount = try OtherUsersMount(uid: Self.owner, arguments: ["--unlocked", "--grace", "0"])
    // The intruder's fake log has the real mount's id.
    let status = try Command.run(Command.appbox, ["status", "--json", mount.mountpoint])
    let id = try #require(
      ((try? JSONSerialization.jsonObject(with: Data(status.output.utf8))) as? [String: Any])
        .flatMap { $0["eventLog"] as? [String: Any] }?["id"] as? String, "\(status.output)")
    let fake = try FakeControlServer(
      uid: Self.intruder, socket: Self.fakeSocket(mount.mountpoint),
      reply: #"{"ok":true,"state":"LOCKED","files":0,"bytes":0}"#,
      events: Self.intruderRun + "/appbox/" + ControlFiles.name(for: mount.mountpoint, "events.d") + "/\(id).jsonl")
    defer { fake.stop() }

    let lock = try Command.run(Command.appbox, ["lock", mount.mountpoint])
    #expect(lock.status == 0, "\(lock.error)")
    #expect(try OtherUser.deviceState(Self.owner, mount.mountpoint) == "LOCKED", "the real mount did not lock")

    var events = ""
    let logged = MountFixtureWait.until {
      events = (try? Command.run(Command.appbox, ["events", mount.mountpoint]).output) ?? ""
      return events.contains(#""to":"LOCKED""#)
    }
    #expect(logged, "events: \(events)")
    #expect(!events.contains("FAKE"), "appbox events showed the intruder's file: \(events)")

    let unlock = try Command.run(Command.appbox, ["unlock", mount.mountpoint])
    #expect(unlock.status == 0, "\(unlock.error)")
    #expect(try OtherUser.deviceState(Self.owner, mount.mountpoint) == "UNLOCKED")
    let unmount = try Command.run(Command.appbox, ["unmount", mount.mountpoint])
    #expect(unmount.status == 0, "\(unmount.error)")
    #expect(!MountFixture.isMounted(mount.mountpoint))
  }

  @Test("a daemon root cannot verify is not replaced by a fake: 75, and the owner still controls the mount")
  func noBeliefWithoutVerification() throws {
    let removeRuntime = try Self.intruderRuntimeDirectory()
    defer { removeRuntime() }
    // The owner's runtime directory is one root has no way to know.
    var template = Array("/tmp/appbox-owner-xdg-XXXXXX".utf8CString)
    let xdg = String(cString: try #require(mkdtemp(&template)))
    defer { _ = try? FileManager.default.removeItem(atPath: xdg) }
    try check(chown(xdg, Self.owner, Self.owner), "chown")
    let mount = try OtherUsersMount(
      uid: Self.owner, arguments: ["--unlocked", "--grace", "0"], environment: ["XDG_RUNTIME_DIR": xdg])
    let fake = try FakeControlServer(
      uid: Self.intruder, socket: Self.fakeSocket(mount.mountpoint),
      reply: #"{"ok":true,"state":"LOCKED","files":0,"bytes":0}"#,
      events: Self.intruderRun + "/appbox/" + ControlFiles.name(for: mount.mountpoint, "events.d")
        + "/20260101-000000-fake.jsonl")
    defer { fake.stop() }

    let lock = try Command.run(Command.appbox, ["lock", mount.mountpoint])
    #expect(lock.status == 75, "appbox lock exited \(lock.status): \(lock.output) \(lock.error)")
    #expect(!lock.output.contains("LOCKED"))
    #expect(lock.error.contains("uid \(Self.owner)"), "\(lock.error)")
    let events = try Command.run(Command.appbox, ["events", mount.mountpoint])
    #expect(events.status == 75, "appbox events exited \(events.status)")
    #expect(!events.output.contains("FAKE"))
    #expect(try OtherUser.deviceState(Self.owner, mount.mountpoint) == "UNLOCKED")

    let ownLock = try OtherUser.run(
      Self.owner, [Command.appbox, "lock", mount.mountpoint], environment: ["XDG_RUNTIME_DIR": xdg])
    #expect(ownLock.status == 0, "\(ownLock.error)")
    #expect(try OtherUser.deviceState(Self.owner, mount.mountpoint) == "LOCKED")
  }

  @Test("a socket in the owner's directory answered by a process that is not the daemon is not believed")
  func peerMustBeTheDaemon() throws {
    let fixture = try MountFixture.unlocked(["--grace", "0"])
    let socket = ControlFiles.path(for: fixture.mountpoint, "sock")
    try check(rename(socket, socket + ".real"), "rename")
    defer { rename(socket + ".real", socket) }
    let fake = try FakeControlServer(uid: 0, socket: socket, reply: #"{"ok":true,"state":"LOCKED"}"#)
    let lock = try Command.run(Command.appbox, ["lock", fixture.mountpoint])
    fake.stop()
    #expect(lock.status == 75, "appbox lock exited \(lock.status): \(lock.output) \(lock.error)")
    #expect(lock.error.contains("not by the daemon"), "\(lock.error)")
    #expect(fixture.deviceState == "UNLOCKED")
    unlink(socket)
    try check(rename(socket + ".real", socket), "rename back")
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    try fixture.unmount()
  }
}

/// Waiting on a condition with a deadline, outside a fixture.
enum MountFixtureWait {
  /// Polls `condition` every 10 ms until it holds or `seconds` pass.
  static func until(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
      if condition() { return true }
      usleep(10_000)
    }
    return condition()
  }
}

/// Root's commands read another user's runtime files only as regular files of that user's,
/// and without blocking: a FIFO put where the event log or the pid file should be holds
/// none of them up.
@Suite("Control channel: another user's runtime files", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct ForeignRuntimeFileTests {
  static let owner: uid_t = 65534

  /// The owner's runtime directory that holds the mount's socket.
  static func runtimeDirectory(of mountpoint: String) throws -> String {
    let name = ControlFiles.name(for: mountpoint, "sock")
    let candidates =
      ["/tmp/appbox-\(owner)"]
      + ((try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []).filter {
        $0.hasPrefix("appbox-\(owner)-")
      }.map { "/tmp/" + $0 }
    return try #require(candidates.first { FileManager.default.fileExists(atPath: $0 + "/" + name) })
  }

  @Test("the event log or the pid file made a FIFO by the owner: root's events, report and status end at once")
  func fifoInPlace() throws {
    let mount = try OtherUsersMount(uid: Self.owner, arguments: ["--unlocked", "--grace", "0"])
    let lock = try Command.run(Command.appbox, ["lock", mount.mountpoint])
    #expect(lock.status == 0, "\(lock.error)")
    let directory = try Self.runtimeDirectory(of: mount.mountpoint)
    let events = try #require(ControlFiles.eventLog(for: mount.mountpoint, in: directory))
    let made = try OtherUser.run(Self.owner, ["/bin/sh", "-c", "rm -f \"$0\" && mkfifo \"$0\"", events])
    try #require(made.status == 0, "\(made.error)")
    for command in [["events", mount.mountpoint], ["report", mount.mountpoint]] {
      let result = try Command.run("/usr/bin/timeout", ["-s", "KILL", "20", Command.appbox] + command)
      #expect(result.status == 77, "appbox \(command[0]) exited \(result.status): \(result.error)")
      #expect(result.error.contains("is not an event log"), "\(result.error)")
    }
    let pid = directory + "/" + ControlFiles.name(for: mount.mountpoint, "pid")
    let replaced = try OtherUser.run(Self.owner, ["/bin/sh", "-c", "rm -f \"$0\" && mkfifo \"$0\"", pid])
    try #require(replaced.status == 0, "\(replaced.error)")
    let status = try Command.run("/usr/bin/timeout", ["-s", "KILL", "20", Command.appbox, "status", mount.mountpoint])
    #expect(status.status == 75, "appbox status exited \(status.status): \(status.error)")
    #expect(status.error.contains("not by the daemon"), "\(status.error)")
    let unmount = try Command.run(
      "/usr/bin/timeout", ["-s", "KILL", "60", Command.appbox, "unmount", mount.mountpoint])
    #expect(unmount.status == 0, "\(unmount.error)")
  }
}
