import Foundation
import Posix
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// What only a kernel shows of the mount options: exit 0 means the mount is up, each FUSE
/// option of the table works or is refused with nothing mounted, the source a user names,
/// root's options, and mountpoints that are not empty. (Their parsing is tested below the
/// mount, in AppBoxCLITests.)
@Suite("Mount options on a mount", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct MountOptionTests {
  /// The FUSE options `appbox mount --help` lists (the option table's), as `-o` items with
  /// a value where they take one.
  static func fuseOptions() throws -> [String] {
    let help = try Command.run(Command.appbox, ["mount", "--help"])
    try #require(help.status == 0, "\(help.error)")
    let lines = help.output.split(separator: "\n")
    let start = try #require(lines.firstIndex { $0.hasPrefix("FUSE options") })
    let values = ["BYTES": "8192", "NAME": "appbox-option-test", "TYPE": "other"]
    return lines[(start + 1)...].compactMap { line -> String? in
      guard line.hasPrefix("  -o ") else { return nil }
      let item = String(line.dropFirst(5).prefix { $0 != " " })
      guard let equals = item.firstIndex(of: "=") else { return item }
      return item[...equals] + (values[String(item[item.index(after: equals)...])] ?? "")
    }
  }

  /// The mount's line in `/proc/self/mountinfo`, split: `[4]` the mountpoint, `[5]` its
  /// options; after the `-`, the type, the source and the superblock's options.
  static func mountLine(_ mountpoint: String) -> (options: [String], type: String, source: String, super: [String])? {
    for line in MountFixture.mountTable().split(separator: "\n") {
      let fields = line.split(separator: " ").map(String.init)
      guard fields.count > 6, fields[4] == mountpoint, let dash = fields.firstIndex(of: "-"), dash + 3 < fields.count
      else { continue }
      return (
        fields[5].split(separator: ",").map(String.init), fields[dash + 1], fields[dash + 2],
        fields[dash + 3].split(separator: ",").map(String.init)
      )
    }
    return nil
  }

  /// `appbox mount` with a deadline: a mount that never reports must fail, not hang.
  static func mount(_ arguments: [String], environment: [String: String]? = nil) throws -> CommandResult {
    try Command.run(
      "/usr/bin/timeout", ["-s", "KILL", "120", Command.appbox, "mount"] + arguments, environment: environment)
  }

  @Test("-o max_read=N mounts, and exit 0 means the mount serves reads (it used to die at INIT after 'ready')")
  func maxRead() throws {
    let directories = try SandboxDirectories()
    try Sys.mkdir(directories.backing + "/Documents", 0o755)
    var generator = SeededGenerator(seed: 8)
    let data = generator.bytes(300_000)
    try writeFile(directories.backing + "/Documents/data", data)
    let result = try Self.mount(["--backing", directories.backing, "-o", "max_read=4096", directories.mountpoint])
    #expect(result.status == 0, "\(result.error)")
    let line = try #require(Self.mountLine(directories.mountpoint), "exit \(result.status) with nothing mounted")
    #expect(line.super.contains("max_read=4096"), "\(line.super)")
    #expect(try readFile(directories.mountpoint + "/Documents/data") == data)
    #expect(try Command.run(Command.appbox, ["unmount", directories.mountpoint]).status == 0)
  }

  @Test("as root every FUSE option of the table mounts and takes effect; subtype is refused with nothing mounted")
  func everyFuseOption() throws {
    let options = try Self.fuseOptions()
    #expect(options.count >= 20, "\(options)")
    for item in options {
      let directories = try SandboxDirectories()
      try Sys.mkdir(directories.backing + "/Documents", 0o755)
      try writeFile(directories.backing + "/Documents/probe", bytes("probe"))
      let result = try Self.mount(["--backing", directories.backing, "-o", item, directories.mountpoint])
      if item.hasPrefix("subtype=") {
        #expect(result.status == 64, "-o \(item): \(result.status) \(result.error)")
        #expect(!MountFixture.isMounted(directories.mountpoint), "-o \(item)")
        continue
      }
      #expect(result.status == 0, "-o \(item): \(result.status) \(result.error)")
      guard let line = Self.mountLine(directories.mountpoint) else {
        Issue.record("-o \(item) exited \(result.status) with nothing mounted")
        continue
      }
      #expect(line.type == "fuse.appbox", "-o \(item): \(line.type)")
      #expect((try? readFile(directories.mountpoint + "/Documents/probe")) == bytes("probe"), "-o \(item)")
      let effect: Bool
      switch item {
      case "ro": effect = line.options.contains("ro")
      case "suid": effect = !line.options.contains("nosuid")
      case "dev": effect = !line.options.contains("nodev")
      case "nosuid", "nodev", "noexec", "noatime": effect = line.options.contains(item)
      case "sync", "dirsync": effect = line.super.contains(item)
      case "allow_other", "allow_root": effect = line.super.contains("allow_other")
      case let value where value.hasPrefix("max_read="): effect = line.super.contains(value)
      case let value where value.hasPrefix("fsname="): effect = line.source == value.dropFirst("fsname=".count)
      default: effect = true
      }
      #expect(effect, "-o \(item): the kernel shows \(line)")
      let unmounted = try Command.run(Command.appbox, ["unmount", directories.mountpoint])
      #expect(unmounted.status == 0, "-o \(item): unmount \(unmounted.error)")
      #expect(!MountFixture.isMounted(directories.mountpoint), "-o \(item)")
    }
  }

  @Test("-o auto_unmount returns once mounted, and the mount goes when the daemon is killed")
  func autoUnmount() throws {
    let directories = try SandboxDirectories()
    let result = try Self.mount(["--backing", directories.backing, "-o", "auto_unmount", directories.mountpoint])
    try #require(result.status == 0, "\(result.status) \(result.error)")
    let pid = try #require(MountFixture.daemonPID(for: directories.mountpoint))
    kill(pid, SIGKILL)
    let deadline = Date().addingTimeInterval(30)
    while MountFixture.isMounted(directories.mountpoint) && Date() < deadline { usleep(20_000) }
    #expect(!MountFixture.isMounted(directories.mountpoint), "still mounted after the daemon was killed")
  }

  @Test("-o fsname names the mount's source for df and findmnt; appbox still finds and controls the mount")
  func fsname() throws {
    let directories = try SandboxDirectories()
    let name = "appbox-src-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let result = try Self.mount(["--backing", directories.backing, "-o", "fsname=\(name)", directories.mountpoint])
    try #require(result.status == 0, "\(result.status) \(result.error)")
    defer { _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint]) }
    #expect(Self.mountLine(directories.mountpoint)?.source == name)
    let found = try Command.run("/usr/bin/findmnt", ["-n", "-o", "TARGET", "-S", name])
    #expect(found.output.trimmingCharacters(in: .whitespacesAndNewlines) == directories.mountpoint, "\(found)")
    let df = try Command.run("/bin/df", [directories.mountpoint])
    #expect(df.output.contains(name), "\(df.output)")
    let status = try Command.run(Command.appbox, ["status", "--json", directories.mountpoint])
    #expect(status.status == 0 && status.output.contains("\"state\""), "\(status.error)")
    #expect(try Command.run(Command.appbox, ["lock", directories.mountpoint]).status == 0)
    #expect(try Command.run(Command.appbox, ["unmount", directories.mountpoint]).status == 0)
  }

  @Test(
    "another user's -o suid or -o dev is refused (77) with the reason; nothing is mounted", arguments: ["suid", "dev"])
  func rootOnlyOptions(option: String) throws {
    let uid: uid_t = 65534
    let directories = try SandboxDirectories()
    try check(chmod(directories.root, 0o755), "chmod")
    let runtime = directories.root + "/run"
    try check(mkdir(runtime, 0o700), "mkdir run")
    for directory in [directories.backing, directories.mountpoint, runtime] {
      try check(chown(directory, uid, uid), "chown \(directory)")
    }
    // Let the user reach /dev/fuse (as OtherUsersMount does), so that only the option can
    // stand in the way.
    let result = try OtherUsersMount.withFUSEDeviceOpen {
      try OtherUser.run(
        uid, [Command.appbox, "mount", "--backing", directories.backing, "-o", option, directories.mountpoint],
        environment: ["XDG_RUNTIME_DIR": runtime])
    }
    #expect(result.status == 77, "\(result.status) \(result.error)")
    #expect(result.error.contains("only root") && result.error.contains(option), "\(result.error)")
    #expect(!MountFixture.isMounted(directories.mountpoint))
    #expect(try directoryNames(directories.backing) == [])
  }

  @Test("a mountpoint with entries is refused (66) and nothing changes; --nonempty mounts over them until the unmount")
  func nonemptyMountpoint() throws {
    let directories = try SandboxDirectories()
    try writeFile(directories.mountpoint + "/mine", bytes("mine"))
    let refused = try Self.mount(["--backing", directories.backing, directories.mountpoint])
    #expect(refused.status == 66, "\(refused.status) \(refused.error)")
    #expect(refused.error.contains("not empty") && refused.error.contains("--nonempty"), "\(refused.error)")
    #expect(!MountFixture.isMounted(directories.mountpoint))
    #expect(try directoryNames(directories.backing) == [], "the backing directory was set up")
    for arguments in [["--nonempty"], ["-o", "nonempty"]] {
      let mounted = try Self.mount(["--backing", directories.backing] + arguments + [directories.mountpoint])
      #expect(mounted.status == 0, "\(arguments): \(mounted.error)")
      #expect(MountFixture.isMounted(directories.mountpoint))
      #expect(errnoOf(access(directories.mountpoint + "/mine", F_OK)) == ENOENT, "hidden while mounted")
      #expect(try Command.run(Command.appbox, ["unmount", directories.mountpoint]).status == 0)
      #expect(try readFile(directories.mountpoint + "/mine") == bytes("mine"), "back after the unmount")
    }
  }

  @Test("without --backing, appbox mount says where the data lives")
  func defaultBackingIsNamed() throws {
    let directories = try SandboxDirectories()
    var environment = ProcessInfo.processInfo.environment
    environment["XDG_DATA_HOME"] = directories.root + "/data"
    let result = try Self.mount([directories.mountpoint], environment: environment)
    try #require(result.status == 0, "\(result.error)")
    defer { _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint]) }
    let backing = directories.root + "/data/appbox/containers/mnt"
    #expect(result.error.contains(backing), "stderr: \(result.error)")
    #expect(result.output.isEmpty, "stdout: \(result.output)")
    try writeFile(directories.mountpoint + "/Documents/x", bytes("x"))
    #expect(try readFile(backing + "/Documents/x") == bytes("x"))
    let given = try SandboxDirectories()
    let quiet = try Self.mount(["--backing", given.backing, given.mountpoint])
    #expect(quiet.status == 0 && quiet.error.isEmpty, "with --backing: \(quiet.error)")
    #expect(try Command.run(Command.appbox, ["unmount", given.mountpoint]).status == 0)
  }

  @Test("a usage error prints its message and one hint, not the usage text (64)")
  func usageErrorIsShort() throws {
    let result = try Command.run(Command.appbox, ["mount", "--backing"])
    #expect(result.status == 64)
    #expect(result.error == "appbox: --backing needs a value\nsee appbox mount --help\n", "\(result.error)")
    let purge = try Command.run(Command.appbox, ["purge", "/nonexistent"])
    #expect(purge.status == 64)
    #expect(purge.error.split(separator: "\n").count == 2, "\(purge.error)")
  }
}
