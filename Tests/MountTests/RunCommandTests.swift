import Foundation
import Posix
import SandboxPolicy
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `appbox run` end to end: shell programs and a Swift example program run in a sandbox,
/// checked from outside (the examples themselves: ExampleProgramTests).
@Suite("appbox run", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct RunCommandTests {
  /// The example program `appbox-example-NAME` (Examples/), built next to the tests.
  static func example(_ name: String) -> String {
    (Command.appbox as NSString).deletingLastPathComponent + "/appbox-example-" + name
  }

  /// The `key=value` lines a program printed (the last value of each key).
  static func lines(_ output: String) -> [String: String] {
    var values: [String: String] = [:]
    for line in output.split(separator: "\n") {
      guard let equals = line.firstIndex(of: "=") else { continue }
      values[String(line[..<equals])] = String(line[line.index(after: equals)...])
    }
    return values
  }

  /// Waits up to `seconds` for `process`; past that, terminates it (SIGTERM, which
  /// `appbox run` passes on) and fails the test.
  static func waitForExit(_ process: Process, seconds: Double = 30, sourceLocation: SourceLocation = #_sourceLocation)
    throws
  {
    let deadline = Date().addingTimeInterval(seconds)
    while process.isRunning && Date() < deadline { usleep(10_000) }
    guard process.isRunning else { return }
    process.terminate()
    process.waitUntilExit()
    Issue.record("the run did not end within \(seconds) s", sourceLocation: sourceLocation)
  }

  @Test("a shell program gets HOME, XDG_* and TMPDIR in the sandbox; the temporary backing is deleted")
  func shellEnvironment() throws {
    let script = #"""
      echo "home=$HOME"; echo "data=$XDG_DATA_HOME"; echo "cache=$XDG_CACHE_HOME"
      echo "config=$XDG_CONFIG_HOME"; echo "tmp=$TMPDIR"; echo "container=$APPBOX_CONTAINER"
      echo cached > "$XDG_CACHE_HOME/c" && echo "wrote=yes"
      echo "backing=$(ls -d "$APPBOX_CONTAINER/../backing")"
      """#
    let result = try Command.run(Command.appbox, ["run", "--", "/bin/sh", "-c", script])
    #expect(result.status == 0, "\(result.error)")
    let seen = Self.lines(result.output)
    let root = try #require(seen["home"])
    #expect(seen["container"] == root)
    #expect(seen["data"] == root + "/Library/Application Support")
    #expect(seen["cache"] == root + "/Library/Caches")
    #expect(seen["config"] == root + "/Library/Preferences")
    #expect(seen["tmp"] == root + "/tmp")
    #expect(seen["wrote"] == "yes")
    let parent = (root as NSString).deletingLastPathComponent
    #expect(seen["backing"] == parent + "/container/../backing")
    #expect(!FileManager.default.fileExists(atPath: parent), "the temporary mountpoint and backing are removed")
  }

  /// Arguments after `run`, and the status expected.
  static let exitCases: [([String], Int32)] = [
    (["--", "/bin/sh", "-c", "exit 7"], 7),
    (["--", "/bin/sh", "-c", "kill -TERM $$"], 143),
    (["--", "/bin/sh", "-c", "kill -KILL $$"], 137),
    (["--", "no-such-program-appbox"], 127),
    (["/bin/true"], 64),
    (["--"], 64),
    (["--capacity", "12Q", "--", "/bin/true"], 65),
  ]

  @Test(
    "the program's exit status is the run's; a signal gives 128+N; not found 127; bad input 64 and 65",
    arguments: exitCases)
  func exitStatus(_ arguments: [String], _ expected: Int32) throws {
    let result = try Command.run(Command.appbox, ["run"] + arguments)
    #expect(result.status == expected, "\(arguments): \(result.error)")
    if expected == 127 { #expect(result.error.contains("command not found")) }
  }

  @Test(
    "SIGTERM or SIGINT sent to appbox run reaches the program, whose status is returned; then it unmounts",
    arguments: [("TERM", SIGTERM), ("INT", SIGINT)])
  func signalForwarded(name: String, signal: Int32) throws {
    let directories = try SandboxDirectories()
    let script = """
      trap 'echo \(name) > "$HOME/Documents/got-signal"; exit 3' \(name)
      echo "$HOME" > "$HOME/Documents/home"
      touch "$HOME/Documents/ready"
      while [ -e "$HOME/Documents/ready" ]; do sleep 0.02; done
      """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Command.appbox)
    process.arguments = ["run", "--backing", directories.backing, "--", "/bin/sh", "-c", script]
    try process.run()
    let ready = directories.backing + "/Documents/ready"
    let deadline = Date().addingTimeInterval(30)
    while !FileManager.default.fileExists(atPath: ready) && Date() < deadline && process.isRunning { usleep(10_000) }
    try #require(FileManager.default.fileExists(atPath: ready), "the program never started")
    kill(process.processIdentifier, signal)
    try Self.waitForExit(process)
    #expect(process.terminationReason == .exit)
    #expect(process.terminationStatus == 3)
    #expect(try readFile(directories.backing + "/Documents/got-signal") == bytes("\(name)\n"))
    // Other tests' runs mount at the same time: look for this run's mountpoint only.
    let mountpoint = try String(decoding: readFile(directories.backing + "/Documents/home"), as: UTF8.self)
      .trimmingCharacters(in: .newlines)
    #expect(mountpoint.hasPrefix("/tmp/appbox-run-"), "HOME was \(mountpoint)")
    #expect(
      !MountFixture.mounts().contains(mountpoint), "the run's mount is gone after the program")
  }

  @Test("an existing mount is reused as it is and stays mounted; --backing alone finds it")
  func reusesMount() throws {
    let fixture = try MountFixture.unlocked()
    let byMountpoint = try Command.run(
      Command.appbox,
      ["run", fixture.mountpoint, "--", "/bin/sh", "-c", "echo one > \"$HOME/Documents/one\"; echo $HOME"])
    #expect(byMountpoint.status == 0, "\(byMountpoint.error)")
    #expect(byMountpoint.output == fixture.mountpoint + "\n")
    #expect(MountFixture.isMounted(fixture.mountpoint))
    let byBacking = try Command.run(
      Command.appbox,
      ["run", "--backing", fixture.backing, "--", "/bin/sh", "-c", "cat \"$HOME/Documents/one\"; echo $HOME"])
    #expect(byBacking.status == 0, "\(byBacking.error)")
    #expect(byBacking.output == "one\n" + fixture.mountpoint + "\n")
    #expect(MountFixture.isMounted(fixture.mountpoint))
    #expect(try readFile(fixture.backingPath("Documents/one")) == bytes("one\n"))
    try fixture.unmount()
  }

  @Test(
    "a reused mount whose daemon is not reachable from here (a sidecar's) runs the program, which cannot lock either")
  func reusesMountWithoutControlChannel() throws {
    let fixture = try MountFixture.unlocked()
    // Another runtime directory: as from another container, no socket of the mount is found.
    let elsewhere = fixture.root + "/other-runtime"
    try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
    chmod(elsewhere, 0o700)
    var environment = ProcessInfo.processInfo.environment
    environment["XDG_RUNTIME_DIR"] = elsewhere
    let result = try Command.run(
      Command.appbox,
      ["run", fixture.mountpoint, "--", "/bin/sh", "-c", "echo $HOME; \(Command.appbox) lock \"$HOME\"; echo lock=$?"],
      environment: environment)
    #expect(result.status == 0, "\(result.error)")
    #expect(result.output == fixture.mountpoint + "\nlock=75\n", "\(result.output)")
    #expect(result.error.contains("runs without device control"), "\(result.error)")
    #expect(fixture.deviceState == "UNLOCKED")
    try fixture.unmount()
  }

  @Test("an ordinary user runs the Swift example in a root-made mount (allow_other) reused by appbox run")
  func ordinaryUserReusesMount() throws {
    let fixture = try MountFixture.unlocked {
      for directory in ["Documents", "Library/Application Support", "Library/Caches", "Library/Preferences", "tmp"] {
        try FileManager.default.createDirectory(atPath: $0 + "/" + directory, withIntermediateDirectories: true)
        try check(chmod($0 + "/" + directory, 0o1777), "chmod \(directory)")
      }
    }
    try check(chmod(fixture.root, 0o755), "chmod")
    let result = try Command.run(
      "/usr/bin/setpriv",
      [
        "--reuid=65534", "--regid=65534", "--clear-groups", "--", Command.appbox, "run", fixture.mountpoint, "--",
        Self.example("document-store"), "mine",
      ],
      environment: ["PATH": "/usr/bin:/bin"])
    #expect(result.status == 0, "\(result.error)\(result.output)")
    let seen = Self.lines(result.output)
    #expect(seen["home"] == fixture.mountpoint)
    #expect(seen["protection"] == #"FileProtectionType(rawValue: "NSFileProtectionComplete")"#)
    #expect(seen["notes"] == "mine")
    let store = fixture.backingPath("Library/Application Support/notes.json")
    #expect(try getXattr(store, "user.appbox.protection") == bytes("complete"))
    #expect(try statPath(store).st_uid == 65534)
    #expect(MountFixture.isMounted(fixture.mountpoint))
    try fixture.unmount()
  }

  @Test("an ordinary user's own mount: mounted and run where /dev/fuse lets them, else appbox mount's 69")
  func ordinaryUserMounts() throws {
    let directories = try SandboxDirectories()
    try check(chmod(directories.root, 0o755), "chmod")
    try check(chown(directories.backing, 65534, 65534), "chown")
    let result = try Command.run(
      "/usr/bin/setpriv",
      [
        "--reuid=65534", "--regid=65534", "--clear-groups", "--", Command.appbox, "run", "--backing",
        directories.backing,
        "--", "/bin/sh", "-c", "echo mine > \"$HOME/Documents/f\"; id -u",
      ],
      environment: ["PATH": "/usr/bin:/bin"])
    let fuseOpenToOthers = (try statPath("/dev/fuse").st_mode & 0o006) == 0o006
    if fuseOpenToOthers {
      #expect(result.status == 0, "\(result.error)")
      #expect(result.output == "65534\n")
      #expect(try statPath(directories.backing + "/Documents/f").st_uid == 65534)
    } else {
      #expect(result.status == 69, "\(result.error)")
      #expect(result.error.contains("/dev/fuse") && result.error.contains("the program did not run"))
    }
  }

}

extension RunCommandTests {
  @Test("a given mountpoint that is not mounted is mounted for the run and unmounted after; the directory stays")
  func mountsAtGivenMountpoint() throws {
    let directories = try SandboxDirectories()
    let result = try Command.run(
      Command.appbox,
      [
        "run", "--capacity", "1G", directories.mountpoint, "--backing", directories.backing, "--", "/bin/sh", "-c",
        "echo \"$HOME\"; echo x > \"$HOME/Documents/x\"",
      ])
    #expect(result.status == 0, "\(result.error)")
    #expect(result.output == directories.mountpoint + "\n")
    #expect(try readFile(directories.backing + "/Documents/x") == bytes("x\n"))
    #expect(!MountFixture.isMounted(directories.mountpoint))
    #expect(FileManager.default.fileExists(atPath: directories.mountpoint))
  }

  @Test("a given mountpoint that is a tmpfs (as a container's volume is) is mounted over for the run")
  func mountsOverAVolume() throws {
    let directories = try SandboxDirectories()
    #expect(mount("tmpfs", directories.mountpoint, "tmpfs", 0, nil) == 0, "mount tmpfs: errno \(errno)")
    defer { umount(directories.mountpoint) }
    let result = try Command.run(
      Command.appbox,
      [
        "run", directories.mountpoint, "--backing", directories.backing, "--", "/bin/sh", "-c",
        "echo x > \"$HOME/Documents/x\"",
      ])
    #expect(result.status == 0, "\(result.error)")
    #expect(try readFile(directories.backing + "/Documents/x") == bytes("x\n"))
    let here = MountFixture.mountTable().split(separator: "\n").filter { $0.contains(" \(directories.mountpoint) ") }
    #expect(here.count == 1 && here[0].contains("tmpfs"), "only the tmpfs stays: \(here)")
  }

  @Test("the program inherits the caller's descriptors, 3 included, and no other of appbox run's")
  func descriptorsInherited() throws {
    let fixture = try MountFixture.unlocked()
    let file = fixture.root + "/given"
    try writeFile(file, bytes("given\n"))
    // The caller has 0, 1, 2, 3 and 7 (whatever else the test runner passed on is closed);
    // the program reads 3 and 7 and lists its own (ls's listing adds one).
    let caller = """
      for fd in $(ls /proc/$$/fd); do case $fd in 0|1|2) ;; *) eval "exec $fd>&-" 2>/dev/null ;; esac; done
      exec 3<'\(file)' 7<'\(file)'
      '\(Command.appbox)' run '\(fixture.mountpoint)' -- /bin/sh -c 'cat <&3; cat <&7; echo $(ls /proc/self/fd)'
      """
    let result = try Command.run("/bin/bash", ["-c", caller])
    #expect(result.status == 0, "\(result.error)")
    let lines = result.output.split(separator: "\n").map(String.init)
    try #require(lines.count == 3, "\(result.output)")
    #expect(lines[0...1] == ["given", "given"])
    let program = Set(lines[2].split(separator: " ").map(String.init))
    #expect(program.isSuperset(of: ["0", "1", "2", "3", "7"]), "\(lines[2])")
    #expect(program.subtracting(["0", "1", "2", "3", "7"]).count == 1, "the program's descriptors: \(lines[2])")
    try fixture.unmount()
  }

  @Test("mount options given for a mount that is reused are reported as not applied")
  func reuseReportsIgnoredOptions() throws {
    let fixture = try MountFixture.unlocked()
    let result = try Command.run(
      Command.appbox, ["run", "--capacity", "1G", "--bfu", fixture.mountpoint, "--", "/bin/true"])
    #expect(result.status == 0)
    #expect(
      result.error == "appbox: using the mount at \(fixture.mountpoint) as it is; not applied: --capacity 1G --bfu\n")
    try fixture.unmount()
  }
}

extension MountFixture {
  /// The mountpoints in this process's mount table.
  static func mounts() -> [String] {
    mountTable().split(separator: "\n").compactMap { $0.split(separator: " ").dropFirst(4).first.map(String.init) }
  }
}

/// `appbox run` reuses only the caller's own mounts: another user's daemon saying that it
/// serves a backing directory proves nothing (root's run would register with it and run its
/// program in that user's mount).
@Suite("appbox run: whose mounts are reused", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct RunReuseOwnershipTests {
  @Test("root's run --backing DIR never runs in another user's mount of DIR; with its MOUNTPOINT it is refused (77)")
  func anotherUsersMountIsNotReused() throws {
    let mount = try OtherUsersMount(uid: 65534, arguments: ["--unlocked"])
    let byBacking = try Command.run(
      Command.appbox, ["run", "--backing", mount.backing, "--", "/bin/sh", "-c", "printf %s \"$APPBOX_CONTAINER\""])
    #expect(byBacking.output != mount.mountpoint, "root's program ran in uid 65534's mount")
    // Root's own mount of that directory fails: the other user's daemon holds it (75).
    #expect(byBacking.status == 75, "\(byBacking.status): \(byBacking.error)")
    let byMountpoint = try Command.run(
      Command.appbox,
      ["run", "--backing", mount.backing, mount.mountpoint, "--", "/bin/sh", "-c", "printf %s \"$APPBOX_CONTAINER\""])
    #expect(byMountpoint.status == 77, "\(byMountpoint.status): \(byMountpoint.error)")
    #expect(byMountpoint.output.isEmpty)
    #expect(byMountpoint.error.contains("only against your own mounts"), "\(byMountpoint.error)")
    let unmount = try Command.run(Command.appbox, ["unmount", mount.mountpoint])
    #expect(unmount.status == 0, "\(unmount.error)")
  }
}
