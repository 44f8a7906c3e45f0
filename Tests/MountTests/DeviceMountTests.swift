import Foundation
import Posix
import SandboxPolicy
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A device mount through the CLI and the kernel: `appbox mount --device` (and `-o
/// device` through mount.fuse3), `appbox app install|remove|list`, `appbox run --app`, the
/// refusals of commands given the wrong kind of mount, and what the kernel's caches show
/// after apps come and go. What the filesystem decides is tested below the mount
/// (AppBoxFSTests.DeviceTests).
@Suite("A device mount", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct DeviceMountTests {
  static let (a, b, shared) = ("com.example.a", "com.example.b", "group.com.example.shared")

  /// `appbox ARGUMENTS`.
  @discardableResult
  static func appbox(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> CommandResult {
    try Command.run(Command.appbox, arguments)
  }

  /// A device mounted with two apps sharing a group.
  static func device(_ arguments: [String] = []) throws -> MountFixture {
    let fixture = try MountFixture(arguments: ["--device"] + arguments)
    for app in [a, b] {
      let installed = try appbox(["app", "install", fixture.mountpoint, app, "--group", shared])
      try #require(installed.status == 0, "app install: \(installed.error)")
    }
    return fixture
  }

  static func app(_ id: String) -> String { "Containers/Data/Application/" + id }
  static func group(_ id: String) -> String { "Containers/Shared/AppGroup/" + id }

  @Test("mount --device, apps installed and listed; the kernel sees the layout, EPERM and EXDEV")
  func installAndList() throws {
    let fixture = try Self.device()
    #expect(try directoryNames(fixture.mountpoint) == ["Containers"])
    #expect(try directoryNames(fixture.path("Containers/Data/Application")).sorted() == [Self.a, Self.b])
    #expect(
      try directoryNames(fixture.path(Self.group(Self.shared) + "/Library")).sorted() == ["Caches", "Preferences"])
    // Read by an independent reader (Python's plistlib), as a device backup tool would.
    let metadata = try Command.shell(
      "python3 -c 'import plistlib, sys; d = plistlib.load(open(sys.argv[1], \"rb\")); "
        + "print(d[\"MCMMetadataIdentifier\"], d[\"MCMMetadataContentClass\"], "
        + "d[\"MCMMetadataInfo\"][\"com.apple.security.application-groups\"])' "
        + shellQuote(fixture.path(Self.app(Self.a) + "/.com.apple.mobile_container_manager.metadata.plist")))
    #expect(metadata == "\(Self.a) 2 ['\(Self.shared)']\n")
    // What programs meet, through the kernel.
    #expect(mkdir(fixture.path(Self.app("com.example.c")), 0o755) == -1 && errno == EPERM)
    #expect(rmdir(fixture.path(Self.app(Self.a))) == -1 && errno == EPERM)
    try writeFile(fixture.path(Self.app(Self.a) + "/Documents/f"), bytes("x"))
    #expect(
      rename(fixture.path(Self.app(Self.a) + "/Documents/f"), fixture.path(Self.app(Self.b) + "/Documents/f")) == -1)
    #expect(errno == EXDEV)
    #expect(link(fixture.path(Self.app(Self.a) + "/Documents/f"), fixture.path(Self.group(Self.shared) + "/f")) == -1)
    #expect(errno == EXDEV)
    try writeFile(fixture.path(Self.group(Self.shared) + "/shared.txt"), bytes("both apps see this"))

    let list = try Self.appbox(["app", "list", fixture.mountpoint])
    #expect(list.status == 0, "\(list.error)")
    #expect(list.output.contains(Self.a) && list.output.contains("groups: \(Self.shared)"), "\(list.output)")
    #expect(list.output.contains("members: \(Self.a), \(Self.b)"), "\(list.output)")
    let json = try Self.appbox(["app", "list", fixture.mountpoint, "--json"])
    let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
    let apps = try #require(object["apps"] as? [[String: Any]])
    let groups = try #require(object["groups"] as? [[String: Any]])
    #expect(apps.map { $0["id"] as? String } == [Self.a, Self.b])
    #expect(groups.first?["members"] as? [String] == [Self.a, Self.b])
    #expect((groups.first?["used"] as? NSNumber)?.int64Value ?? 0 > 0)
    let status = try Self.appbox(["status", fixture.mountpoint])
    #expect(status.output.contains("containers:") && status.output.contains(Self.shared), "\(status.output)")
    try fixture.unmount()
  }

  @Test("mount -t fuse -o device mounts a device; the apps survive a remount")
  func dashOAndRemount() throws {
    let directories = try SandboxDirectories()
    let mounted = try Command.run(
      "/bin/mount",
      ["-t", "fuse", "\(Command.appbox)#\(directories.backing)", directories.mountpoint, "-o", "device,capacity=64M"])
    try #require(mounted.status == 0, "mount -t fuse -o device: \(mounted.error)")
    #expect(try Self.appbox(["app", "install", directories.mountpoint, Self.a, "--group", Self.shared]).status == 0)
    try writeFile(directories.mountpoint + "/" + Self.app(Self.a) + "/Documents/kept", bytes("kept"))
    #expect(try Self.appbox(["unmount", directories.mountpoint]).status == 0)
    #expect(
      try Self.appbox(["mount", "--device", "--backing", directories.backing, directories.mountpoint]).status == 0)
    defer { _ = try? Self.appbox(["unmount", directories.mountpoint]) }
    let status = try Quota.status(directories.mountpoint)
    let containers = try #require(status["containers"] as? [[String: Any]])
    #expect(containers.map { $0["id"] as? String } == [Self.a, Self.shared])
    #expect(try readFile(directories.mountpoint + "/" + Self.app(Self.a) + "/Documents/kept") == bytes("kept"))
  }

  @Test("a device's backing is not mounted plain, nor a plain one as a device (65, nothing mounted)")
  func wrongKindOfBacking() throws {
    let fixture = try Self.device()
    try fixture.unmount()
    let plain = try Self.appbox(["mount", "--backing", fixture.backing, fixture.mountpoint])
    #expect(plain.status == 65 && plain.error.contains("--device"), "\(plain.status) \(plain.error)")
    #expect(!MountFixture.isMounted(fixture.mountpoint))
    let other = try MountFixture.unlocked()
    try other.unmount()
    let device = try Self.appbox(["mount", "--device", "--backing", other.backing, other.mountpoint])
    #expect(device.status == 65 && device.error.contains("without --device"), "\(device.status) \(device.error)")
    #expect(!MountFixture.isMounted(other.mountpoint))
  }

  @Test("appbox run --app: Foundation's and AppBoxKit's directories resolve into the app's container")
  func runAsApp() throws {
    let fixture = try Self.device()
    let script = #"""
      echo "home=$HOME"; echo "fixed=$CFFIXED_USER_HOME"; echo "data=$XDG_DATA_HOME"; echo "cache=$XDG_CACHE_HOME"
      echo "config=$XDG_CONFIG_HOME"; echo "tmp=$TMPDIR"; echo "container=$APPBOX_CONTAINER"
      echo cached > "$XDG_CACHE_HOME/c"
      """#
    let run = try Self.appbox(["run", fixture.mountpoint, "--app", Self.b, "--", "/bin/sh", "-c", script])
    #expect(run.status == 0, "\(run.error)")
    let seen = RunCommandTests.lines(run.output)
    let root = fixture.path(Self.app(Self.b))
    #expect(seen["home"] == root && seen["fixed"] == root && seen["container"] == root)
    #expect(seen["data"] == root + "/Library/Application Support")
    #expect(seen["cache"] == root + "/Library/Caches")
    #expect(seen["config"] == root + "/Library/Preferences")
    #expect(seen["tmp"] == root + "/tmp")
    #expect(try readFile(fixture.backingPath(Self.app(Self.b) + "/Library/Caches/c")) == bytes("cached\n"))
    // A Swift program with AppBoxKit: its Documents and the device's capacity.
    let check = try Self.appbox([
      "run", fixture.mountpoint, "--app", Self.a, "--", RunCommandTests.example("capacity-check"), "1000",
    ])
    #expect(RunCommandTests.lines(check.output)["write"] == "done", "\(check.error)\(check.output)")
    #expect(Int64(RunCommandTests.lines(check.output)["important"] ?? "") ?? 0 > 1000)
    #expect(try statPath(fixture.backingPath(Self.app(Self.a) + "/Documents/large.bin")).st_size == 1000)
    try fixture.unmount()
  }

  @Test("removing an app: its container goes, the kernel forgets it, its group goes with the last member")
  func removeApp() throws {
    let fixture = try Self.device()
    try writeFile(fixture.path(Self.app(Self.a) + "/Library/Caches/c"), [UInt8](repeating: 1, count: 100_000))
    _ = try statPath(fixture.path(Self.app(Self.a) + "/Library/Caches/c"))  // the kernel caches the names
    let removed = try Self.appbox(["app", "remove", fixture.mountpoint, Self.a])
    #expect(removed.status == 0, "\(removed.error)")
    #expect(removed.output.contains("removed \(Self.a)"), "\(removed.output)")
    #expect(throws: (any Error).self) { try statPath(fixture.path(Self.app(Self.a))) }
    #expect(try directoryNames(fixture.path("Containers/Data/Application")) == [Self.b])
    #expect(!FileManager.default.fileExists(atPath: fixture.backingPath(Self.app(Self.a))))
    let last = try Self.appbox(["app", "remove", fixture.mountpoint, Self.b])
    #expect(last.output.contains("groups removed with it: \(Self.shared)"), "\(last.output)")
    #expect(try directoryNames(fixture.path("Containers/Shared/AppGroup")).isEmpty)
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "used") == Quota.number(status, "deviceUsed"), "nothing charged to removed apps")
    try fixture.unmount()
  }

  @Test("an app whose program runs is not removed (75); once the run ends, it is")
  func removeWhileRunning() throws {
    let fixture = try Self.device()
    let release = fixture.root + "/release"
    let started = fixture.root + "/started"
    let run = Process()
    run.executableURL = URL(fileURLWithPath: Command.appbox)
    run.arguments = [
      "run", fixture.mountpoint, "--app", Self.a, "--", "/bin/sh", "-c",
      "touch \(started); while [ ! -e \(release) ]; do sleep 0.05; done",
    ]
    try run.run()
    #expect(fixture.waitUntil(seconds: 30) { FileManager.default.fileExists(atPath: started) })
    let refused = try Self.appbox(["app", "remove", fixture.mountpoint, Self.a])
    #expect(refused.status == 75 && refused.error.contains("runs as \(Self.a)"), "\(refused.status) \(refused.error)")
    #expect(FileManager.default.fileExists(atPath: fixture.backingPath(Self.app(Self.a))))
    try writeFile(release, [])
    try RunCommandTests.waitForExit(run)
    // Nothing of the program's tree is left: the run is over when `appbox run` returns.
    let removed = try Self.appbox(["app", "remove", fixture.mountpoint, Self.a])
    #expect(removed.status == 0, "\(removed.error)")
    try fixture.unmount()
  }

  @Test("a run that leaves nothing behind is over when appbox run returns: its app is removed at once, every time")
  func removeRightAfterRun() throws {
    let fixture = try Self.device()
    for index in 0..<8 {
      let app = "com.example.once\(index)"
      let installed = try Self.appbox(["app", "install", fixture.mountpoint, app])
      try #require(installed.status == 0, "\(installed.error)")
      let run = try Self.appbox(["run", fixture.mountpoint, "--app", app, "--", "/bin/true"])
      #expect(run.status == 0, "\(run.error)")
      let removed = try Self.appbox(["app", "remove", fixture.mountpoint, app])
      #expect(removed.status == 0, "run \(index): \(removed.status) \(removed.error)")
    }
    try fixture.unmount()
  }

  @Test("a process the program left behind keeps its app installed until it ends")
  func leftoversKeepTheApp() throws {
    let fixture = try Self.device()
    let release = fixture.root + "/release"
    // The leftover closes what it inherited (the test's Process watches a descriptor of
    // its own, which would hold this call until the leftover ends).
    let leftover =
      "import os, time\nos.closerange(3, 65536)\nwhile not os.path.exists(\"\(release)\"): time.sleep(0.05)"
    let run = try Self.appbox([
      "run", fixture.mountpoint, "--app", Self.a, "--", "/bin/sh", "-c",
      "python3 -c \(shellQuote(leftover)) </dev/null >/dev/null 2>&1 & exit 0",
    ])
    #expect(run.status == 0, "\(run.error)")
    let refused = try Self.appbox(["app", "remove", fixture.mountpoint, Self.a])
    #expect(refused.status == 75, "the leftover still runs as the app: \(refused.error)")
    try writeFile(release, [])
    var removed = refused
    let deadline = Date().addingTimeInterval(10)
    while removed.status == 75, Date() < deadline {
      usleep(20_000)
      removed = try Self.appbox(["app", "remove", fixture.mountpoint, Self.a])
    }
    #expect(removed.status == 0, "\(removed.error)")
    try fixture.unmount()
  }

  /// A command, and the status and words of its error.
  static let refusals: [([String], Int32, String)] = [
    (["app", "install", "MNT", a], 65, "installed already"),
    (["app", "install", "MNT", "com.example.c", "--group", a], 65, "bundle id"),
    (["app", "install", "MNT", shared], 65, "App Group's id"),
    (["app", "install", "MNT", "../etc"], 65, "empty component"),
    (["app", "install", "MNT", "com.example/evil"], 65, "'/'"),
    (["app", "install", "MNT", "app"], 65, "reverse-DNS"),
    (["app", "install", "MNT", ""], 65, "empty id"),
    (["app", "install", "MNT", "com." + String(repeating: "a", count: 300)], 65, "longer than 217"),
    (["app", "install", "MNT", "com.example.c", "--group", "group..x"], 65, "empty component"),
    (["app", "remove", "MNT", "com.example.unknown"], 66, "no app com.example.unknown"),
    (["app", "remove", "MNT", shared], 66, "no app"),
    (["run", "MNT", "--app", "com.example.unknown", "--", "/bin/true"], 66, "no such app"),
    (["run", "MNT", "--app", "bad id", "--", "/bin/true"], 65, "--app"),
    (["run", "MNT", "--", "/bin/true"], 66, "give --app"),
    (["app", "frobnicate", "MNT"], 64, "unknown app command"),
  ]

  @Test("bad input to a device gets a clear error and changes nothing", arguments: refusals)
  func refused(_ arguments: [String], _ status: Int32, _ words: String) throws {
    let fixture = try Self.device()
    let before = try Command.shell("cd \(fixture.backing) && find . | sort")
    let result = try Self.appbox(arguments.map { $0 == "MNT" ? fixture.mountpoint : $0 })
    #expect(result.status == status, "\(arguments): \(result.status) \(result.error)")
    #expect(result.error.contains(words), "\(arguments): \(result.error)")
    #expect(try Command.shell("cd \(fixture.backing) && find . | sort") == before, "nothing changed")
    try fixture.unmount()
  }

  @Test("device commands on a plain mount are refused (66), and --app")
  func plainMount() throws {
    let fixture = try MountFixture.unlocked()
    for arguments in [
      ["app", "install", fixture.mountpoint, Self.a], ["app", "list", fixture.mountpoint],
      ["app", "remove", fixture.mountpoint, Self.a], ["run", fixture.mountpoint, "--app", Self.a, "--", "/bin/true"],
    ] {
      let result = try Self.appbox(arguments)
      #expect(result.status == 66 && result.error.contains("not a device mount"), "\(arguments): \(result.error)")
    }
    #expect(try directoryNames(fixture.mountpoint).sorted() == ["Documents", "Library", "tmp"], "unchanged")
    try fixture.unmount()
  }

  @Test("appbox experiment runs one program per app at once and shows whose cache paid for whose writes")
  func experimentWithApps() throws {
    let directories = try SandboxDirectories()
    let events = directories.root + "/events"
    try FileManager.default.createDirectory(atPath: events, withIntermediateDirectories: false)
    let page = directories.root + "/sweep.html"
    let workload = ReportTests.repository + "/Examples/cache-workload.py"
    // The writer waits until the reader has cached about ten items (1.4 MB of the device's
    // 4 KiB blocks in use: it cannot look into the reader's container), then writes 2 MB
    // of documents.
    let writer =
      "while [ $(( $(stat -f -c '%b - %f' \"$HOME\") )) -lt 350 ]; do sleep 0.05; done; "
      + "head -c 2000000 /dev/zero > \"$HOME/Documents/blob\""
    let result = try Self.appbox([
      "experiment", "--capacities", "3M,16M", "--events-dir", events, "--output", page, "--usage-interval", "0",
      "--group", "group.com.example.shared", "--app", "com.example.reader=python3 \(workload) 24 200 128",
      "--app", "com.example.writer=\(writer)",
    ])
    #expect(result.status == 0, "\(result.error)")
    #expect(result.output.contains("paid for others"), "\(result.output)")
    #expect(result.output.split(separator: "\n").filter { $0.contains("com.example.reader") }.count == 2)
    // From the runs' own logs: at 3 MiB the reader's cache paid for the writer's writes.
    let small = try readFile(events + "/3MiB-1.jsonl")
    let paid = String(decoding: small, as: UTF8.self).split(separator: "\n").compactMap {
      (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
    }.filter {
      $0["type"] as? String == "purge" && $0["container"] as? String == "com.example.reader"
        && $0["requester"] as? String == "com.example.writer"
    }
    #expect(!paid.isEmpty, "the reader's cache paid for the writer's writes")
    let large = String(decoding: try readFile(events + "/16MiB-1.jsonl"), as: UTF8.self)
    #expect(!large.contains("\"type\":\"purge\""), "nothing purged at 16 MiB")
    // The page: the pair's cell, as the log adds it up.
    let bytes = paid.reduce(0) { $0 + (($1["bytes"] as? NSNumber)?.int64Value ?? 0) }
    let html = String(decoding: try readFile(page), as: UTF8.self)
    #expect(
      html.contains(
        "data-capacity=\"3145728\" data-cache=\"com.example.reader\" data-writer=\"com.example.writer\" data-bytes=\"\(bytes)\""
      ),
      "the page's cell for the pair")
    try Command.shell(
      "python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' \(shellQuote(page))")
  }

  @Test("a write in one app purges the others' caches; the events name both containers")
  func deviceWidePurgeEvents() throws {
    let fixture = try Self.device(["--capacity", "4M"])
    try writeFile(fixture.path(Self.app(Self.a) + "/Library/Caches/c"), [UInt8](repeating: 1, count: 1_500_000))
    try writeFile(fixture.path(Self.group(Self.shared) + "/Library/Caches/g"), [UInt8](repeating: 1, count: 1_000_000))
    try writeFile(fixture.path(Self.app(Self.b) + "/Documents/big"), [UInt8](repeating: 2, count: 2_500_000))
    let purges = try Quota.events(fixture.mountpoint)
    #expect(!purges.isEmpty)
    for purge in purges {
      #expect(purge["requester"] as? String == Self.b, "\(purge)")
      #expect([Self.a, Self.shared].contains(purge["container"] as? String ?? ""), "\(purge)")
    }
    try fixture.unmount()
  }
}
