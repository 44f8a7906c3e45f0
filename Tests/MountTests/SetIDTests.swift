import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Set-user-ID and set-group-ID clearing, which the daemon owes the kernel under
/// FUSE_HANDLE_KILLPRIV_V2: every change of a file's data by a caller other than root (who
/// stands in for CAP_FSETID) clears the bits as a local filesystem does, whichever way the
/// change reaches the file, and the mount shows the new mode as soon as the call returns.
@Suite("Set-ID clearing", .needsFUSE, .timeLimit(.minutes(10)))
struct SetIDTests {
  /// One way of changing a file's data: a shell snippet run with `$f` set to the file.
  /// A snippet that reads the FIFO `$gate` waits there until the test has looked at the
  /// mount (``run(_:on:fixture:whileWaiting:)``).
  struct Change: Sendable, CustomTestStringConvertible {
    let name: String
    let script: String
    var asNobody = true
    var mountArguments: [String] = []

    var testDescription: String {
      ([name, asNobody ? "as uid 65534" : "as root"] + mountArguments).joined(separator: " ")
    }
  }

  /// Opens the file read-only, waits at the gate, then appends to it.
  static let joining = "exec 3<\"$f\"; cat \"$gate\"; printf x >> \"$f\""

  /// Every path that changes a file's data.
  static let changes: [Change] = [
    Change(name: "append", script: "printf x >> \"$f\""),
    Change(name: "append", script: "printf x >> \"$f\"", asNobody: false),
    Change(name: "buffered write", script: "printf x | dd of=\"$f\" conv=notrunc 2>/dev/null"),
    Change(
      name: "O_DIRECT write", script: "dd if=/dev/zero of=\"$f\" bs=4096 count=1 oflag=direct conv=notrunc 2>/dev/null"),
    // The first open is read-only: with passthrough on, the writer joins its passthrough
    // (the test checks at the gate that the reader holds the file that way).
    Change(name: "writer joining a reader", script: joining),
    Change(name: "writer joining a reader", script: joining, asNobody: false),
    Change(name: "writer joining a reader", script: joining, mountArguments: ["--no-passthrough"]),
    Change(name: "truncate", script: "truncate -s 2 \"$f\""),
    Change(name: "truncate", script: "truncate -s 2 \"$f\"", asNobody: false),
    Change(name: "O_TRUNC open", script: ": > \"$f\""),
    Change(name: "punch hole", script: "fallocate -p -o 0 -l 4096 \"$f\""),
    Change(name: "punch hole", script: "fallocate -p -o 0 -l 4096 \"$f\"", asNobody: false),
    Change(name: "zero range", script: "fallocate -z -o 0 -l 4 \"$f\""),
    Change(name: "fallocate", script: "fallocate -o 0 -l 8192 \"$f\""),
    Change(name: "fallocate keep size", script: "fallocate -n -o 0 -l 8192 \"$f\""),
    Change(
      name: "copy_file_range",
      script:
        "/usr/bin/python3 -c 'import os, sys; s = os.open(sys.argv[1], os.O_RDONLY); d = os.open(sys.argv[1], os.O_WRONLY); assert os.copy_file_range(s, d, 2, 0, 4) == 2' \"$f\""
    ),
  ]

  /// The modes and groups each change starts from: set-user-ID and set-group-ID with and
  /// without group execute, in a group the caller is not in (root's) and in one it is
  /// (65534's, where set-group-ID stays unless group-executable).
  static let starts: [(mode: mode_t, gid: gid_t)] = [
    (0o6777, 0), (0o6767, 0), (0o4777, 0), (0o2767, 65534), (0o2777, 65534),
  ]

  /// The modes after `change`, started from `mode` and group `gid`: on the mount (as
  /// `statx` asks for the mode alone, which the kernel answers from its cache while it
  /// is valid, and as `stat` asks), of the backing file, and on a plain directory.
  func modesAfter(_ change: Change, mode: mode_t, gid: gid_t, fixture: MountFixture) throws -> (
    cached: mode_t, mount: mode_t, backing: mode_t, plain: mode_t
  ) {
    var modes: [mode_t] = []
    for path in [fixture.path("Documents/setid"), fixture.root + "/plain-setid"] {
      try writeFile(path, bytes("0123456789"))
      try check(chown(path, 0, gid), "chown \(path)")
      try check(chmod(path, mode), "chmod \(path)")
      // A writer's handle still open would keep the reader of "joining" off passthrough.
      #expect(Quota.waitForReleases(fixture))
      try run(change, on: path, fixture: fixture) {
        guard path.hasPrefix(fixture.mountpoint) else { return }
        let expected: Int64 = Self.passthroughExpected(change) ? 1 : 0
        #expect(
          fixture.waitUntil { (try? PassthroughTests.passthroughFiles(fixture)) == expected },
          "files open by passthrough while the reader holds the file")
      }
      modes.append(try statxMode(path) & 0o7777)
      modes.append(try statPath(path).st_mode & 0o7777)
    }
    let backing = try statPath(fixture.backingPath("Documents/setid")).st_mode & 0o7777
    return (modes[0], modes[1], backing, modes[3])
  }

  /// Whether the mount of `change` serves read-only opens by passthrough.
  static func passthroughExpected(_ change: Change) -> Bool {
    PassthroughTests.expected && !change.mountArguments.contains("--no-passthrough")
  }

  /// Runs `change` on `path`, as its user; a change that waits at the gate goes on after
  /// `whileWaiting` (the gate is a FIFO: opening it for writing, which succeeds once the
  /// script reads it, and closing it lets the script's `cat` end).
  func run(_ change: Change, on path: String, fixture: MountFixture, whileWaiting: () throws -> Void) throws {
    let gate = fixture.root + "/gate"
    if access(gate, F_OK) != 0 {
      try check(mkfifo(gate, 0o666), "mkfifo \(gate)")
      try check(chmod(gate, 0o666), "chmod \(gate)")
    }
    let command = "f=" + shellQuote(path) + "; gate=" + shellQuote(gate) + "; " + change.script
    let process = Process()
    process.executableURL = URL(fileURLWithPath: change.asNobody ? "/usr/bin/setpriv" : "/bin/sh")
    process.arguments =
      (change.asNobody ? ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh"] : []) + ["-c", command]
    let errors = Pipe()
    process.standardError = errors
    try process.run()
    if change.script.contains("$gate") {
      try whileWaiting()
      var writer: Int32 = -1
      #expect(
        fixture.waitUntil {
          writer = open(gate, O_WRONLY | O_NONBLOCK | O_CLOEXEC); return writer >= 0
        })
      if writer >= 0 { close(writer) }
    }
    let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "\(change.script): \(message)")
  }

  @Test("a change of a file's data clears set-ID bits as on a local filesystem, at once", arguments: changes)
  func clearing(_ change: Change) throws {
    let fixture = try MountFixture.unlocked(["-o", "allow_other"] + change.mountArguments)
    try check(chmod(fixture.root, 0o755), "chmod fixture root")
    for (mode, gid) in Self.starts {
      let modes = try modesAfter(change, mode: mode, gid: gid, fixture: fixture)
      let octal = { (mode: mode_t) in String(mode, radix: 8) }
      let summary =
        "from \(octal(mode)) group \(gid): local \(octal(modes.plain)); mount \(octal(modes.mount)), "
        + "cached \(octal(modes.cached)), backing \(octal(modes.backing))"
      #expect(modes.mount == modes.plain, "\(summary)")
      #expect(modes.cached == modes.plain, "the kernel learns at once: \(summary)")
      #expect(modes.backing == modes.plain, "\(summary)")
    }
    // Asked after the first requests (the kernel's INIT comes first).
    let passthrough = try Quota.status(fixture.mountpoint)["passthrough"] as? Bool
    #expect(passthrough == Self.passthroughExpected(change))
    try fixture.unmount()
  }

  @Test("a mount is nosuid and nodev: a set-user-ID root program run through it keeps the caller's uid")
  func mountIsNosuid() throws {
    let fixture = try MountFixture.unlocked(["-o", "allow_other"])
    try check(chmod(fixture.root, 0o755), "chmod fixture root")
    let line = MountFixture.mountTable().split(separator: "\n").first { $0.contains(" \(fixture.mountpoint) ") }
    let options = try #require(line, "no mountinfo line").split(separator: " ")[5].split(separator: ",")
    #expect(options.contains("nosuid") && options.contains("nodev"), "\(options)")
    // id(1), root's and set-user-ID, as a user would leave it in the sandbox.
    let tool = fixture.path("Documents/id")
    try FileManager.default.copyItem(atPath: "/usr/bin/id", toPath: tool)
    try check(chmod(tool, 0o4755), "chmod id")
    let run = try OtherUser.run(65534, [tool, "-u"])
    #expect(run.status == 0, "\(run.error)")
    #expect(run.output == "65534\n", "the effective uid through the mount")
    try fixture.unmount()
  }
}
