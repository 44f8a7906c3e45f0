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
  struct Change: Sendable, CustomTestStringConvertible {
    let name: String
    let script: String
    var asNobody = true
    var mountArguments: [String] = []

    var testDescription: String {
      ([name, asNobody ? "as uid 65534" : "as root"] + mountArguments).joined(separator: " ")
    }
  }

  /// Every path that changes a file's data.
  static let changes: [Change] = [
    Change(name: "append", script: "printf x >> \"$f\""),
    Change(name: "append", script: "printf x >> \"$f\"", asNobody: false),
    Change(name: "buffered write", script: "printf x | dd of=\"$f\" conv=notrunc 2>/dev/null"),
    Change(
      name: "O_DIRECT write", script: "dd if=/dev/zero of=\"$f\" bs=4096 count=1 oflag=direct conv=notrunc 2>/dev/null"),
    // The first open is read-only: with passthrough on, the writer joins its passthrough.
    Change(name: "writer joining a reader", script: "exec 3<\"$f\"; printf x >> \"$f\""),
    Change(name: "writer joining a reader", script: "exec 3<\"$f\"; printf x >> \"$f\"", asNobody: false),
    Change(
      name: "writer joining a reader", script: "exec 3<\"$f\"; printf x >> \"$f\"", mountArguments: ["--no-passthrough"]
    ),
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
      let command = "f=" + shellQuote(path) + "; " + change.script
      let result = change.asNobody ? try runAsNobody(command) : try Command.run("/bin/sh", ["-c", command])
      #expect(result.status == 0, "\(change.script): \(result.error)")
      modes.append(try statxMode(path) & 0o7777)
      modes.append(try statPath(path).st_mode & 0o7777)
    }
    let backing = try statPath(fixture.backingPath("Documents/setid")).st_mode & 0o7777
    return (modes[0], modes[1], backing, modes[3])
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
    // Asked after the first requests (the kernel's INIT comes first): passthrough was on
    // for "joining" unless switched off.
    let passthrough = try Quota.status(fixture.mountpoint)["passthrough"] as? Bool
    #expect(passthrough == (PassthroughTests.expected && !change.mountArguments.contains("--no-passthrough")))
    try fixture.unmount()
  }
}
