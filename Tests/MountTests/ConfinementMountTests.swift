import Foundation
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A device's app confinement through the kernel (docs/reference.md#app-confinement): a
/// program of `appbox run --app` tries every path to another app's file, and what the
/// mount decides (EPERM) and what the kernel decides (an inherited descriptor) is told
/// apart. What the filesystem decides alone is tested below the mount
/// (AppBoxFSTests.ConfinementTests).
@Suite("App confinement on a mount", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct ConfinementMountTests {
  static let (a, b, c) = ("com.example.a", "com.example.b", "com.example.c")
  static let (shared, cGroup) = ("group.com.example.shared", "group.com.example.c")

  /// What the probe tries, run as app b with its working directory and descriptor 3 in
  /// a's Documents (both opened outside the run). Prints one `name errno-or-ok` line each.
  static let probe = #"""
    import errno, json, os, subprocess, sys
    root, a, c, group, other_group = sys.argv[1:6]
    home = os.environ["HOME"]
    results = {}
    def attempt(name, action):
        try:
            action()
            results[name] = "ok"
        except OSError as error:
            results[name] = errno.errorcode[error.errno]
    def read(path):
        with open(path, "rb") as f:
            f.read()
    secret = a + "/Documents/secret"
    attempt("own", lambda: open(home + "/Documents/mine", "w").write("mine"))
    attempt("group", lambda: read(group + "/shared"))
    attempt("open", lambda: read(secret))
    attempt("stat", lambda: os.stat(secret))
    attempt("container", lambda: os.stat(a))
    attempt("absent app", lambda: os.stat(root + "/Containers/Data/Application/com.example.absent"))
    attempt("other group", lambda: os.stat(other_group))
    attempt("list apps", lambda: os.listdir(root + "/Containers/Data/Application"))
    attempt("rename into own", lambda: os.rename(secret, home + "/Documents/stolen"))
    attempt("link into own", lambda: os.link(secret, home + "/Documents/linked"))
    attempt("rename own out", lambda: os.rename(home + "/Documents/mine", c + "/Documents/given"))
    os.symlink(secret, home + "/Documents/link")
    attempt("own symlink", lambda: read(home + "/Documents/link"))
    attempt("proc fd", lambda: read("/proc/self/fd/3"))
    attempt("cwd open", lambda: read("secret"))
    attempt("inherited read", lambda: os.read(3, 100))
    attempt("inherited fstat", lambda: os.fstat(3))
    child = subprocess.run(["cat", secret], capture_output=True)
    results["child"] = "ok" if child.returncode == 0 else "EPERM" if b"not permitted" in child.stderr else "other"
    detached = subprocess.run(["setsid", "-w", "sh", "-c", "cat " + secret + " 2>&1"], capture_output=True)
    results["detached"] = "ok" if detached.returncode == 0 else "EPERM" if b"not permitted" in detached.stdout else "other"
    with open("/proc/self/cgroup") as f:
        results["cgroup"] = [line[3:].strip() for line in f if line.startswith("0::")][0]
    print(json.dumps(results))
    """#

  @Test("a run's program reaches another app's file by no path; what the kernel decides is an inherited descriptor")
  func everyPath() throws {
    let fixture = try MountFixture(arguments: ["--device"])
    for (app, group) in [(Self.a, Self.shared), (Self.b, Self.shared), (Self.c, Self.cGroup)] {
      let installed = try Command.run(Command.appbox, ["app", "install", fixture.mountpoint, app, "--group", group])
      try #require(installed.status == 0, "app install: \(installed.error)")
    }
    let (a, b, c) = (
      fixture.path(DeviceMountTests.app(Self.a)), fixture.path(DeviceMountTests.app(Self.b)),
      fixture.path(DeviceMountTests.app(Self.c))
    )
    let (group, otherGroup) = (
      fixture.path(DeviceMountTests.group(Self.shared)), fixture.path(DeviceMountTests.group(Self.cGroup))
    )
    try writeFile(a + "/Documents/secret", bytes("secret"))
    try writeFile(group + "/shared", bytes("shared"))
    // The kernel has a's names cached when the run starts (an unconfined stat).
    var st = stat()
    #expect(stat(a + "/Documents/secret", &st) == 0)
    let script =
      "exec 3<\(shellQuote(a + "/Documents/secret")); cd \(shellQuote(a + "/Documents")); "
      + "\(shellQuote(Command.appbox)) run \(shellQuote(fixture.mountpoint)) --app \(Self.b) -- "
      + "/usr/bin/python3 -c \(shellQuote(Self.probe)) \(shellQuote(fixture.mountpoint)) \(shellQuote(a)) \(shellQuote(c)) "
      + "\(shellQuote(group)) \(shellQuote(otherGroup))"
    let output = try Command.shell(script)
    let results = try #require(
      try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "probe printed \(output)")
    // The mount decides: every lookup of a's container, every open and every name.
    for name in [
      "open", "stat", "container", "absent app", "other group", "list apps", "rename into own", "link into own",
      "own symlink", "proc fd", "cwd open", "child", "detached",
    ] {
      #expect(results[name] as? String == "EPERM", "\(name): \(results[name] ?? "-")")
    }
    // Its own container and its group work; nothing leaves its container (EXDEV, for
    // everyone).
    #expect(results["own"] as? String == "ok" && results["group"] as? String == "ok")
    #expect(results["rename own out"] as? String != "ok")
    // The kernel decides: a descriptor opened outside the run is a capability.
    #expect(results["inherited read"] as? String == "ok" && results["inherited fstat"] as? String == "ok")
    #expect((results["cgroup"] as? String)?.contains("/run-") == true)
    #expect(!FileManager.default.fileExists(atPath: b + "/Documents/stolen"))
    #expect(!FileManager.default.fileExists(atPath: b + "/Documents/linked"))
    // Outside the run everything is reachable; the refusals are counted and logged.
    #expect(try readFile(a + "/Documents/secret") == bytes("secret"))
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "confinement.refusals") >= 13, "\(status)")
    let events = try Command.run(Command.appbox, ["events", fixture.mountpoint]).output
    #expect(events.contains("\"type\":\"confinement\"") && events.contains("\"app\":\"\(Self.b)\""))
  }

  @Test("a device whose daemon cannot make control groups (not root) refuses --app (69); the program does not run")
  func unavailableRefuses() throws {
    let uid: uid_t = 65534  // nobody: fusermount3 needs a user name
    let mount = try OtherUsersMount(uid: uid, arguments: ["--device"])
    let installed = try OtherUser.run(uid, [Command.appbox, "app", "install", mount.mountpoint, Self.a])
    try #require(installed.status == 0, "app install: \(installed.error)")
    let marker = mount.root + "/ran"
    let run = try OtherUser.run(
      uid, [Command.appbox, "run", mount.mountpoint, "--app", Self.a, "--", "/usr/bin/touch", marker])
    #expect(run.status == 69, "\(run.status): \(run.error)")
    #expect(run.error.contains("app confinement needs"), "\(run.error)")
    #expect(!FileManager.default.fileExists(atPath: marker), "the program ran unconfined")
  }

  /// The hierarchy's directory of a `--app` run's group on `fixture` (the run ends at once:
  /// its empty group stays until the next run or the unmount).
  static func runGroup(_ fixture: MountFixture) throws -> String {
    let script = #"""
      hierarchy=$(awk '$9 == "cgroup2" && $4 == "/" { print $5; exit }' /proc/self/mountinfo)
      echo "$hierarchy$(sed -n 's/^0:://p' /proc/self/cgroup)"
      """#
    let result = try Command.run(
      Command.appbox, ["run", fixture.mountpoint, "--app", Self.a, "--", "/bin/sh", "-c", script])
    try #require(result.status == 0, "\(result.error)")
    return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
  }

  @Test("groups a killed daemon left are removed by the next device's first run; a live daemon's stay")
  func abandonedGroupsRemoved() throws {
    var devices: [MountFixture] = []
    var groups: [String] = []
    for _ in 0..<3 {
      let fixture = try MountFixture(arguments: ["--device"])
      let installed = try Command.run(Command.appbox, ["app", "install", fixture.mountpoint, Self.a])
      try #require(installed.status == 0, "app install: \(installed.error)")
      devices.append(fixture)
    }
    for fixture in devices.prefix(2) { groups.append(try Self.runGroup(fixture)) }
    let (killed, live) = (devices[0], devices[1])
    let pid = try #require(killed.daemonPID)
    #expect(kill(pid, SIGKILL) == 0)
    #expect(Spawn.waitForExit(pid, milliseconds: 10_000))
    let lazy = try Command.run("/usr/bin/fusermount3", ["-uz", killed.mountpoint])
    #expect(lazy.status == 0, "fusermount3 -uz: \(lazy.error)")
    let killedDirectory = (groups[0] as NSString).deletingLastPathComponent
    #expect(FileManager.default.fileExists(atPath: killedDirectory), "the killed daemon's groups were not left")

    _ = try Self.runGroup(devices[2])
    #expect(!FileManager.default.fileExists(atPath: killedDirectory), "the killed daemon's groups are still there")
    #expect(FileManager.default.fileExists(atPath: groups[1]), "a live daemon's group was removed")
    _ = try Self.runGroup(live)
    try live.unmount()
    try devices[2].unmount()
  }

  @Test("the run's group is the daemon's: a program that is not root can neither leave it nor move in another")
  func cannotLeave() throws {
    let fixture = try MountFixture(arguments: ["--device"])
    let installed = try Command.run(Command.appbox, ["app", "install", fixture.mountpoint, Self.a])
    try #require(installed.status == 0, "app install: \(installed.error)")
    // As nobody (setpriv), inside the run: write its own pid to the hierarchy's root and to
    // the mount's directory, which a process moves to only with write access there.
    let script = #"""
      hierarchy=$(awk '$9 == "cgroup2" && $4 == "/" { print $5; exit }' /proc/self/mountinfo)
      group=$(sed -n 's/^0:://p' /proc/self/cgroup)
      for target in "$hierarchy" "$hierarchy$(dirname "$group")"; do
        if setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo 0 > $target/cgroup.procs" 2>/dev/null; then
          echo "left to $target"
        fi
      done
      echo "in $group"
      """#
    let result = try Command.run(
      Command.appbox, ["run", fixture.mountpoint, "--app", Self.a, "--", "/bin/sh", "-c", script])
    #expect(result.status == 0, "\(result.error)")
    #expect(!result.output.contains("left to"), "\(result.output)")
    #expect(result.output.contains("/run-"), "\(result.output)")
  }
}
