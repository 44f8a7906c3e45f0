import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Control channel, refusal counters and events", .needsFUSE, .timeLimit(.minutes(10)))
struct ControlChannelTests {
  /// Runs `arguments` as nobody (uid/gid 65534, no supplementary groups), with a minimal
  /// environment (no runtime directory inherited from root).
  func asNobody(_ arguments: [String]) throws -> CommandResult {
    try Command.run(
      "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--"] + arguments,
      environment: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"])
  }

  /// Lets other users reach the mountpoint (mkdtemp made its parent 0700), so that what
  /// stops them is the control channel, not the path.
  func openPath(_ fixture: MountFixture) {
    chmod(fixture.root, 0o755)
  }

  @Test("another user gets 77 for lock, unlock, status, events, drop-caches, purge and unmount; nothing changes")
  func othersCannotControl() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    openPath(fixture)
    // The refusal must come from the control channel: nobody can run the CLI and see the mount.
    let version = try asNobody([Command.appbox, "--version"])
    try #require(version.status == 0, "nobody cannot run appbox: \(version.status) \(version.error)")
    var st = stat()
    try #require(try asNobody(["/usr/bin/stat", fixture.mountpoint]).status == 0 && stat(fixture.mountpoint, &st) == 0)

    for command in ["lock", "unlock", "status", "events", "drop-caches", "unmount"] {
      let result = try asNobody([Command.appbox, command, fixture.mountpoint])
      #expect(result.status == 77, "appbox \(command) as nobody exited \(result.status): \(result.error)")
      #expect(result.error.contains("only the user who mounted"), "a refusal says why: \(result.error)")
      #expect(result.output.isEmpty, "\(command): \(result.output)")
    }
    let purge = try asNobody([Command.appbox, "purge", fixture.mountpoint, "--domain", "tmp", "--all"])
    #expect(purge.status == 77, "appbox purge as nobody exited \(purge.status): \(purge.error)")
    #expect(fixture.deviceState == "UNLOCKED")
    #expect(MountFixture.isMounted(fixture.mountpoint))

    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    let unlock = try asNobody([Command.appbox, "unlock", fixture.mountpoint])
    #expect(unlock.status == 77, "appbox unlock as nobody exited \(unlock.status): \(unlock.error)")
    #expect(fixture.deviceState == "LOCKED")
    try fixture.control("unlock")
    try fixture.unmount()
  }

  @Test("the daemon's socket is owner-only: nobody cannot connect to it directly")
  func socketIsOwnerOnly() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    openPath(fixture)
    let socket = ControlFiles.path(for: fixture.mountpoint, "sock")
    var st = stat()
    try #require(lstat(socket, &st) == 0, "no control socket at \(socket)")
    #expect(st.st_mode & S_IFMT == S_IFSOCK)
    #expect(st.st_mode & 0o077 == 0, "socket mode \(String(st.st_mode & 0o777, radix: 8))")
    var dir = stat()
    #expect(lstat(ControlFiles.directory, &dir) == 0 && dir.st_mode & 0o077 == 0 && dir.st_uid == 0)

    let script = """
      import socket, sys
      s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
      try:
          s.connect(sys.argv[1])
      except PermissionError:
          print('denied'); sys.exit(0)
      s.sendall(b'lock\\n')
      print('connected', s.recv(4096).decode().strip()); sys.exit(1)
      """
    let direct = try asNobody(["/usr/bin/python3", "-c", script, socket])
    #expect(direct.status == 0, "nobody reached the control socket: \(direct.output) \(direct.error)")
    #expect(direct.output.trimmingCharacters(in: .whitespacesAndNewlines) == "denied")
    #expect(fixture.deviceState == "UNLOCKED")
    try fixture.unmount()
  }

  @Test("events --follow prints each event as it is recorded, and exits 0 once the mount is gone")
  func eventsFollow() throws {
    let fixture = try MountFixture.unlocked(["--grace", "0"])
    let follower = Process()
    follower.executableURL = URL(fileURLWithPath: Command.appbox)
    follower.arguments = ["events", "--follow", fixture.mountpoint]
    let pipe = Pipe()
    follower.standardOutput = pipe
    let output = Mutex("")
    pipe.fileHandleForReading.readabilityHandler = { handle in
      let data = handle.availableData
      output.withLock { $0 += String(decoding: data, as: UTF8.self) }
    }
    try follower.run()
    defer {
      pipe.fileHandleForReading.readabilityHandler = nil
      if follower.isRunning { kill(follower.processIdentifier, SIGKILL) }
    }
    for (command, state) in [("lock", "LOCKED"), ("unlock", "UNLOCKED")] {
      #expect(try Command.run(Command.appbox, [command, fixture.mountpoint]).status == 0)
      #expect(
        fixture.waitUntil { output.withLock { $0.contains(#""to":"\#(state)""#) } },
        "no \(state) event followed: \(output.withLock { $0 })")
    }
    try fixture.unmount()
    #expect(fixture.waitUntil { !follower.isRunning }, "still following an unmounted sandbox")
    follower.waitUntilExit()
    #expect(follower.terminationStatus == 0)
  }

  @Test("drop-caches: the kernel forgets the mount's idle files and directories, but not a working directory")
  func dropCaches() throws {
    let fixture = try MountFixture.unlocked()
    for path in ["Documents/a/b", "Library/Caches/c"] {
      try FileManager.default.createDirectory(atPath: fixture.path(path), withIntermediateDirectories: true)
    }
    for path in ["Documents/a/b/f", "Documents/a/g", "Library/Caches/c/h", "tmp/i"] {
      try writeFile(fixture.path(path), bytes(path))
    }
    func nodes() throws -> Int64 { Quota.number(try Quota.status(fixture.mountpoint), "nodes") }
    #expect(try nodes() >= 10, "every file and directory above is held")
    // A shell working in Documents/a/b, which reports its getcwd(3) once told to.
    let gate = fixture.root + "/gate"
    try check(mkfifo(gate, 0o600), "mkfifo")
    let shell = Process()
    shell.executableURL = URL(fileURLWithPath: "/bin/sh")
    shell.currentDirectoryURL = URL(fileURLWithPath: fixture.path("Documents/a/b"))
    shell.arguments = ["-c", "read line < '\(gate)'; /bin/pwd -P > '\(fixture.root)/cwd'"]
    try shell.run()
    let dropped = try Command.run(Command.appbox, ["drop-caches", fixture.mountpoint])
    #expect(dropped.status == 0, "\(dropped.error)")
    #expect(dropped.output.hasPrefix("the kernel forgot "), "\(dropped.output)")
    // Left: the working directory and its ancestors up to the root (the kernel keeps a
    // held dentry's parents).
    #expect(try nodes() == 3, "Documents, a and b")
    try writeFile(gate, bytes("go\n"))
    shell.waitUntilExit()
    #expect(try readFile(fixture.root + "/cwd") == bytes(fixture.path("Documents/a/b") + "\n"), "getcwd still works")
    // Once the shell is gone, everything goes; and comes back by name.
    #expect(
      fixture.waitUntil {
        (try? Command.run(Command.appbox, ["drop-caches", fixture.mountpoint]))?.status == 0 && (try? nodes()) == 0
      })
    #expect(try readFile(fixture.path("Documents/a/b/f")) == bytes("Documents/a/b/f"))
    try fixture.unmount()
  }
}
