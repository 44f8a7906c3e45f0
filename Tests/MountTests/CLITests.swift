import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `appbox` command-line errors: exit code, message, and nothing changed.
@Suite("Command line", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct CLITests {
  /// A fresh temp directory with a backing dir, removed at the end.
  final class Scratch {
    let root: String
    init() throws {
      var template = Array("/tmp/appbox-cli-XXXXXX".utf8CString)
      guard let made = mkdtemp(&template) else { throw SyscallError(call: "mkdtemp", code: errno) }
      root = String(cString: made)
      try check(mkdir(root + "/backing", 0o755), "mkdir backing")
    }
    deinit { _ = try? FileManager.default.removeItem(atPath: root) }
    var backing: String { root + "/backing" }
    /// Names in the scratch root and in the backing dir.
    func snapshot() throws -> [String] {
      try directoryNames(root) + ["--"] + directoryNames(backing)
    }
  }

  static func appbox(_ arguments: String...) throws -> CommandResult {
    try Command.run(Command.appbox, arguments)
  }

  @Test(
    "a bad size, duration or percentage exits 65 and says how to write one, once",
    arguments: [["--grace", "10"], ["--cx-timeout", "5x"], ["--capacity", "lots"], ["--purge-at", "abc"]])
  func badValueHintOnce(arguments: [String]) throws {
    let result = try Command.run(Command.appbox, ["mount"] + arguments + ["/tmp"])
    #expect(result.status == 65, "\(result.error)")
    #expect(result.error.components(separatedBy: "e.g.").count == 2, "\(result.error)")
  }

  @Test("mount on a missing mountpoint exits 66 and says so; nothing is created")
  func missingMountpoint() throws {
    let scratch = try Scratch()
    let before = try scratch.snapshot()
    let result = try Self.appbox("mount", "--backing", scratch.backing, scratch.root + "/nowhere")
    #expect(result.status == 66)
    #expect(result.error.contains("does not exist"), "\(result.error)")
    #expect(result.error.contains(scratch.root + "/nowhere"))
    #expect(try scratch.snapshot() == before)
    #expect(!MountFixture.isMounted(scratch.root + "/nowhere"))
  }

  @Test("mount on a regular file exits 66; the file is unchanged")
  func fileMountpoint() throws {
    let scratch = try Scratch()
    try writeFile(scratch.root + "/file", bytes("keep"))
    let before = try scratch.snapshot()
    let result = try Self.appbox("mount", "--backing", scratch.backing, scratch.root + "/file")
    #expect(result.status == 66)
    #expect(result.error.contains("not a directory"), "\(result.error)")
    #expect(try readFile(scratch.root + "/file") == bytes("keep"))
    #expect(try scratch.snapshot() == before)
    #expect(!MountFixture.isMounted(scratch.root + "/file"))
  }

  @Test("mount on an already mounted mountpoint exits 75; the existing mount keeps working")
  func alreadyMounted() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/kept"), bytes("kept"))
    let other = try Scratch()
    let result = try Self.appbox("mount", "--backing", other.backing, fixture.mountpoint)
    #expect(result.status == 75)
    #expect(result.error.contains("already mounted"), "\(result.error)")
    #expect(try readFile(fixture.path("Documents/kept")) == bytes("kept"))
    #expect(try directoryNames(other.backing) == [], "the second backing dir was touched")
    let table = MountFixture.mountTable()
    #expect(table.split(separator: "\n").filter { $0.contains(" \(fixture.mountpoint) ") }.count == 1)
    try fixture.unmount()
  }

  @Test(
    "a mountpoint that is another kind of mount (a tmpfs, as a container's volume is) is mounted over: when empty, or with --nonempty"
  )
  func mountsOverOtherMounts() throws {
    let scratch = try Scratch()
    let mountpoint = scratch.root + "/volume"
    try check(mkdir(mountpoint, 0o755), "mkdir volume")
    try check(Glibc.mount("tmpfs", mountpoint, "tmpfs", 0, nil), "mount tmpfs")
    defer { umount(mountpoint) }
    // An empty one is mounted over as it is; one with entries only when asked (--nonempty).
    let empty = try Self.appbox("mount", "--backing", scratch.backing, mountpoint)
    #expect(empty.status == 0, "\(empty.error)")
    #expect(try Self.appbox("unmount", mountpoint).status == 0)
    try writeFile(mountpoint + "/below", bytes("below"))
    #expect(try Self.appbox("mount", "--backing", scratch.backing, mountpoint).status == 66)
    let result = try Self.appbox("mount", "--nonempty", "--backing", scratch.backing, mountpoint)
    #expect(result.status == 0, "\(result.error)")
    #expect(FileManager.default.fileExists(atPath: mountpoint + "/Documents"))
    #expect(try Self.appbox("unmount", mountpoint).status == 0)
    #expect(try readFile(mountpoint + "/below") == bytes("below"), "the tmpfs shows again")
  }

  @Test(
    "an unknown -o option exits 64 and names the option; nothing is mounted",
    arguments: ["bogus", "allow_other,nonsense", "fsname="])
  func unknownOption(option: String) throws {
    let scratch = try Scratch()
    try check(mkdir(scratch.root + "/mnt", 0o755), "mkdir mnt")
    let before = try scratch.snapshot()
    let result = try Self.appbox("mount", "--backing", scratch.backing, "-o", option, scratch.root + "/mnt")
    #expect(result.status == 64)
    #expect(result.error.contains("-o"), "\(result.error)")
    #expect(!MountFixture.isMounted(scratch.root + "/mnt"))
    #expect(try scratch.snapshot() == before)
    #expect(try directoryNames(scratch.root + "/mnt") == [])
  }

  @Test(
    "a bad --busy-poll or --handles value exits 65 and says what is accepted; nothing is mounted",
    arguments: [
      ("--busy-poll", "abc"), ("--busy-poll", "-1"), ("--busy-poll", "1001"), ("--busy-poll", "30us"),
      ("--busy-poll", ""), ("--handles", "abc"), ("--handles", "-1"), ("--handles", "1073741825"),
      ("--handles", "1M"), ("--handles", ""),
    ])
  func badCount(option: String, value: String) throws {
    let scratch = try Scratch()
    try check(mkdir(scratch.root + "/mnt", 0o755), "mkdir mnt")
    let before = try scratch.snapshot()
    let result = try Self.appbox("mount", "--backing", scratch.backing, option, value, scratch.root + "/mnt")
    #expect(result.status == 65, "\(result.error)")
    let accepted = option == "--handles" ? "0 to 1073741824" : "0 to 1000"
    #expect(result.error.contains(option) && result.error.contains(accepted), "\(result.error)")
    #expect(!MountFixture.isMounted(scratch.root + "/mnt"))
    #expect(try scratch.snapshot() == before)
  }

  @Test("a missing backing directory exits 66 and is not created")
  func missingBacking() throws {
    let scratch = try Scratch()
    try check(mkdir(scratch.root + "/mnt", 0o755), "mkdir mnt")
    let before = try scratch.snapshot()
    let result = try Self.appbox("mount", "--backing", scratch.root + "/nobacking", scratch.root + "/mnt")
    #expect(result.status == 66)
    #expect(result.error.contains("backing"), "\(result.error)")
    #expect(errnoOf(access(scratch.root + "/nobacking", F_OK)) == ENOENT)
    #expect(!MountFixture.isMounted(scratch.root + "/mnt"))
    #expect(try scratch.snapshot() == before)
  }

  @Test("a backing path that is a file exits 66")
  func fileBacking() throws {
    let scratch = try Scratch()
    try check(mkdir(scratch.root + "/mnt", 0o755), "mkdir mnt")
    try writeFile(scratch.root + "/notadir", bytes("x"))
    let result = try Self.appbox("mount", "--backing", scratch.root + "/notadir", scratch.root + "/mnt")
    #expect(result.status == 66)
    #expect(!MountFixture.isMounted(scratch.root + "/mnt"))
    #expect(try readFile(scratch.root + "/notadir") == bytes("x"))
  }

  @Test(
    "usage errors exit 64 with a hint",
    arguments: [["frobnicate"], [], ["mount"], ["mount", "--bogus", "/tmp"], ["mount", "a", "b"]])
  func usageErrors(arguments: [String]) throws {
    let result = try Command.run(Command.appbox, arguments)
    #expect(result.status == 64, "\(arguments): \(result.error)")
    #expect(!result.error.isEmpty)
    if arguments == ["frobnicate"] {
      #expect(result.error.contains("frobnicate"))
      #expect(result.error.contains("--help"))
    }
  }

  @Test("--version exits 0 and prints the version")
  func version() throws {
    let result = try Self.appbox("--version")
    #expect(result.status == 0)
    #expect(result.output.hasPrefix("appbox "))
    #expect(result.output.contains("."))
    #expect(result.error.isEmpty)
  }

  @Test("--help exits 0 and lists mount and unmount")
  func help() throws {
    let result = try Self.appbox("--help")
    #expect(result.status == 0)
    #expect(result.output.contains("mount"))
    #expect(result.output.contains("unmount"))
  }

  @Test("unmount of a directory that is not mounted exits 75")
  func unmountNotMounted() throws {
    let scratch = try Scratch()
    try check(mkdir(scratch.root + "/mnt", 0o755), "mkdir mnt")
    let result = try Self.appbox("unmount", scratch.root + "/mnt")
    #expect(result.status == 75, "\(result.error)")
    #expect(!result.error.isEmpty)
  }

  @Test("unmount while a file is open in the mount exits 75 (busy), suggests --lazy, and keeps the mount")
  func unmountBusy() throws {
    let fixture = try MountFixture.unlocked()
    let fd = try openFile(fixture.path("Documents/open"), O_RDWR | O_CREAT, 0o644)
    let result = try Self.appbox("unmount", fixture.mountpoint)
    #expect(result.status == 75, "\(result.error)")
    #expect(result.error.contains("--lazy"))
    #expect(MountFixture.isMounted(fixture.mountpoint))
    try writeAll(fd, bytes("still"))
    close(fd)
    #expect(try readFile(fixture.backingPath("Documents/open")) == bytes("still"))
    try fixture.unmount()
  }

  @Test("a remount of the same backing dir shows the data written before")
  func remountKeepsData() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/persist"), bytes("persisted"))
    #expect(setXattr(fixture.path("Documents/persist"), "com.apple.MobileBackup", [1]) == 0)
    try fixture.unmount()
    let result = try Self.appbox("mount", "--unlocked", "--backing", fixture.backing, fixture.mountpoint)
    #expect(result.status == 0, "\(result.error)")
    defer { _ = try? Self.appbox("unmount", fixture.mountpoint) }
    #expect(try readFile(fixture.path("Documents/persist")) == bytes("persisted"))
    #expect(try getXattr(fixture.path("Documents/persist"), "com.apple.MobileBackup") == [1])
    #expect(try Self.appbox("unmount", fixture.mountpoint).status == 0)
    #expect(!MountFixture.isMounted(fixture.mountpoint))
  }

  @Test(
    "-o subtype= is refused (64): the type fuse.appbox is how appbox finds its mounts; nothing is mounted",
    arguments: ["subtype=x", "allow_other,subtype=appbox2", "fsname=x,subtype=appbox"])
  func reservedOptions(option: String) throws {
    let scratch = try Scratch()
    try check(mkdir(scratch.root + "/mnt", 0o755), "mkdir mnt")
    let before = try scratch.snapshot()
    let result = try Self.appbox("mount", "--backing", scratch.backing, "-o", option, scratch.root + "/mnt")
    #expect(result.status == 64, "\(option): \(result.status) \(result.error)")
    #expect(result.error.contains("fuse.appbox"), "\(result.error)")
    #expect(!MountFixture.isMounted(scratch.root + "/mnt"))
    #expect(try scratch.snapshot() == before)
  }

  @Test("-o max_read=abc exits 65 with one message, before the backing directory is touched")
  func badMaxRead() throws {
    let scratch = try Scratch()
    try check(mkdir(scratch.root + "/mnt", 0o755), "mkdir mnt")
    let before = try scratch.snapshot()
    let result = try Self.appbox("mount", "--backing", scratch.backing, "-o", "max_read=abc", scratch.root + "/mnt")
    #expect(result.status == 65, "\(result.status) \(result.error)")
    #expect(result.error.components(separatedBy: "max_read=abc").count == 2, "printed once: \(result.error)")
    #expect(!MountFixture.isMounted(scratch.root + "/mnt"))
    #expect(try scratch.snapshot() == before, "the layout was created")
  }

  @Test("a capacity below 1 MiB exits 65 and names the minimum", arguments: ["0", "1", "1023K"])
  func capacityTooSmall(capacity: String) throws {
    let scratch = try Scratch()
    try check(mkdir(scratch.root + "/mnt", 0o755), "mkdir mnt")
    let before = try scratch.snapshot()
    let result = try Self.appbox("mount", "--backing", scratch.backing, "--capacity", capacity, scratch.root + "/mnt")
    #expect(result.status == 65, "\(capacity): \(result.status) \(result.error)")
    #expect(result.error.contains("minimum") && result.error.contains("1M"), "\(result.error)")
    #expect(!MountFixture.isMounted(scratch.root + "/mnt"))
    #expect(try scratch.snapshot() == before)
  }

  @Test("the readiness descriptor is no command-line option, and its variable is not taken blindly")
  func readyDescriptorIsInternal() throws {
    let scratch = try Scratch()
    try check(mkdir(scratch.root + "/mnt", 0o755), "mkdir mnt")
    let option = try Command.run(
      "/usr/bin/timeout",
      [
        "-s", "KILL", "20", Command.appbox, "mount", "--backing", scratch.backing, "--ready-fd", "1",
        scratch.root + "/mnt",
      ])
    #expect(option.status == 64, "--ready-fd: \(option.status) \(option.output) \(option.error)")
    #expect(!MountFixture.isMounted(scratch.root + "/mnt"))
    // Descriptor 3 is not a pipe here (nothing open there), so the variable is refused.
    let variable = try Command.run(
      Command.appbox, ["mount", "--backing", scratch.backing, scratch.root + "/mnt"],
      environment: ["PATH": "/usr/bin:/bin", "APPBOX_INTERNAL_READY_FD": "3"])
    #expect(variable.status == 64, "\(variable.status) \(variable.error)")
    #expect(!MountFixture.isMounted(scratch.root + "/mnt"))
    #expect(try directoryNames(scratch.backing) == [])
  }

  @Test("the daemon's pid file is not writable by others")
  func pidFileMode() throws {
    let fixture = try MountFixture.unlocked()
    var st = stat()
    try check(lstat(ControlFiles.path(for: fixture.mountpoint, "pid"), &st), "lstat pid file")
    #expect(st.st_mode & 0o022 == 0, "pid file mode \(String(st.st_mode & 0o777, radix: 8))")
    #expect(st.st_mode & S_IFMT == S_IFREG)
    try fixture.unmount()
  }

  @Test("protect on a file outside any AppBox mount exits 66 and sets nothing")
  func protectOutsideMount() throws {
    let scratch = try Scratch()
    let file = scratch.root + "/plain"
    try writeFile(file, bytes("x"))
    let result = try Self.appbox("protect", file, "--class", "complete")
    #expect(result.status == 66, "\(result.status) \(result.output) \(result.error)")
    #expect(result.error.contains("not inside an AppBox mount"), "\(result.error)")
    #expect(try listXattrNames(file).isEmpty)
    #expect(try Self.appbox("protect", scratch.root + "/missing", "--class", "complete").status == 66)
  }

  @Test("protect of a file whose class is closed now exits 1 (not 77) and says to unlock")
  func protectClosedClass() throws {
    let fixture = try MountFixture.unlocked(["--grace", "0"])
    try writeFile(fixture.path("Documents/secret"), bytes("s"))
    #expect(try Self.appbox("protect", fixture.path("Documents/secret"), "--class", "complete").status == 0)
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    let result = try Self.appbox("protect", fixture.path("Documents/secret"), "--class", "none")
    #expect(result.status == 1, "\(result.status) \(result.error)")
    #expect(result.error.contains("unlock"), "\(result.error)")
    try fixture.control("unlock")
    try fixture.unmount()
  }
}
