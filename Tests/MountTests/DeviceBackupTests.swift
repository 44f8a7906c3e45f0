import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A device's backup and restore on mounts: one backup with a domain per app and per App
/// Group, read by Python's `sqlite3` and `plistlib`; restored whole or one app into a
/// device, or one app into a plain sandbox.
@Suite("A device's backup and restore", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct DeviceBackupTests {
  static let (a, b, shared) = (DeviceMountTests.a, DeviceMountTests.b, DeviceMountTests.shared)

  /// Each row's domain and path, and each app's groups in Manifest.plist, as Python reads
  /// them: `DOMAIN PATH` lines, then `groups APP GROUP,GROUP`.
  static let readerScript = """
    import os, plistlib, sqlite3, sys
    backup = sys.argv[1]
    manifest = plistlib.load(open(os.path.join(backup, "Manifest.plist"), "rb"))
    assert manifest["IsEncrypted"] is False
    db = sqlite3.connect(os.path.join(backup, "Manifest.db"))
    for domain, path in sorted(db.execute("SELECT domain, relativePath FROM Files")):
        print(domain, path)
    for app, entry in sorted(manifest["Applications"].items()):
        print("groups", app, ",".join(entry.get("com.apple.security.application-groups", [])))
    """

  /// A device with two apps sharing a group, and data in every kind of place.
  static func device() throws -> MountFixture {
    let fixture = try DeviceMountTests.device()
    let (appA, appB, group) = (DeviceMountTests.app(a), DeviceMountTests.app(b), DeviceMountTests.group(shared))
    for (path, text) in [
      (appA + "/Documents/note", "a's note"), (appA + "/Library/Application Support/db", "a's db"),
      (appA + "/Library/Caches/c", "cache"), (appA + "/tmp/t", "scratch"), (appB + "/Documents/other", "b's"),
      (group + "/shared.json", "shared"), (group + "/Library/Preferences/p.plist", "prefs"),
      (group + "/Library/Caches/gc", "group cache"), (appB + "/Documents/skip", "excluded"),
    ] {
      try writeFile(fixture.path(path), bytes(text))
    }
    #expect(setXattr(fixture.path(appB + "/Documents/skip"), BackupTests.modern, BackupTests.excludeItem) == 0)
    return fixture
  }

  @Test("one backup holds a domain per app and per group, never Caches, tmp or metadata; its plist names the groups")
  func backup() throws {
    let fixture = try Self.device()
    let out = fixture.root + "/backup"
    let made = try Command.run(Command.appbox, ["backup", fixture.mountpoint, "--to", out])
    #expect(made.status == 0, "\(made.error)")
    let read = try Command.run("python3", ["-c", Self.readerScript, out])
    #expect(read.status == 0, "\(read.error)")
    let lines = Set(read.output.split(separator: "\n").map(String.init))
    for line in [
      "AppDomain-\(Self.a) Documents/note", "AppDomain-\(Self.a) Library/Application Support/db",
      "AppDomain-\(Self.b) Documents/other", "AppDomainGroup-\(Self.shared) shared.json",
      "AppDomainGroup-\(Self.shared) Library/Preferences/p.plist", "groups \(Self.a) \(Self.shared)",
      "groups \(Self.b) \(Self.shared)",
    ] {
      #expect(lines.contains(line), "\(line) in \(lines.sorted())")
    }
    for absent in ["Library/Caches/c", "tmp/t", "Documents/skip", "Library/Caches/gc", ".com.apple.mobile_container"] {
      #expect(!read.output.contains(absent), "\(absent) is not backed up")
    }
    let named = try Command.run(
      Command.appbox, ["backup", fixture.mountpoint, "--to", out + "2", "--bundle-id", Self.a])
    #expect(named.status == 64 && named.error.contains("every app"), "\(named.error)")
    try fixture.unmount()
  }

  @Test("restore --device brings every app, group and membership back; --bundle-id one app with its groups")
  func restoreDevice() throws {
    let fixture = try Self.device()
    let out = fixture.root + "/backup"
    #expect(try Command.run(Command.appbox, ["backup", fixture.mountpoint, "--to", out]).status == 0)
    try fixture.unmount()

    let directories = try SandboxDirectories()
    let whole = directories.root + "/whole"
    let restored = try Command.run(Command.appbox, ["restore", out, "--device", "--backing", whole])
    #expect(restored.status == 0, "\(restored.error)")
    #expect(
      restored.output.contains("2 apps") && restored.output.contains("groups \(Self.shared)"), "\(restored.output)")
    let mounted = try Command.run(Command.appbox, ["mount", "--device", "--backing", whole, directories.mountpoint])
    try #require(mounted.status == 0, "\(mounted.error)")
    defer { _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint]) }
    let status = try Quota.status(directories.mountpoint)
    let containers = try #require(status["containers"] as? [[String: Any]])
    #expect(containers.map { $0["id"] as? String } == [Self.a, Self.b, Self.shared])
    #expect(containers.last?["members"] as? [String] == [Self.a, Self.b])
    let root = directories.mountpoint + "/"
    #expect(try readFile(root + DeviceMountTests.app(Self.a) + "/Documents/note") == bytes("a's note"))
    #expect(try readFile(root + DeviceMountTests.group(Self.shared) + "/shared.json") == bytes("shared"))
    #expect(
      try directoryNames(root + DeviceMountTests.app(Self.a) + "/Library/Caches").isEmpty, "Caches come back empty")
    #expect(!FileManager.default.fileExists(atPath: root + DeviceMountTests.app(Self.b) + "/Documents/skip"))
    #expect(try Command.run(Command.appbox, ["unmount", directories.mountpoint]).status == 0)

    let one = directories.root + "/one"
    let single = try Command.run(Command.appbox, ["restore", out, "--device", "--bundle-id", Self.b, "--backing", one])
    #expect(single.status == 0, "\(single.error)")
    #expect(try directoryNames(one + "/Containers/Data/Application") == [Self.b])
    #expect(try readFile(one + "/" + DeviceMountTests.group(Self.shared) + "/shared.json") == bytes("shared"))

    let plain = directories.root + "/plain"
    let app = try Command.run(Command.appbox, ["restore", out, "--bundle-id", Self.a, "--backing", plain])
    #expect(app.status == 0, "\(app.error)")
    #expect(try readFile(plain + "/Documents/note") == bytes("a's note"))
    #expect(!FileManager.default.fileExists(atPath: plain + "/Containers"), "a plain sandbox")

    let unknown = try Command.run(
      Command.appbox,
      ["restore", out, "--device", "--bundle-id", "com.example.none", "--backing", directories.root + "/x"])
    #expect(
      unknown.status == 65 && !FileManager.default.fileExists(atPath: directories.root + "/x"), "\(unknown.error)")
  }

  @Test("a group whose members a backup does not name (a device's own backup) is left out, and said so")
  func groupWithoutMembers() throws {
    let fixture = try Self.device()
    let out = fixture.root + "/backup"
    #expect(try Command.run(Command.appbox, ["backup", fixture.mountpoint, "--to", out]).status == 0)
    try fixture.unmount()
    // As a device writes it: no groups list in Manifest.plist.
    try Command.shell(
      """
      python3 -c 'import plistlib, sys
      path = sys.argv[1] + "/Manifest.plist"
      manifest = plistlib.load(open(path, "rb"))
      for entry in manifest["Applications"].values():
          entry.pop("com.apple.security.application-groups", None)
      plistlib.dump(manifest, open(path, "wb"), fmt=plistlib.FMT_BINARY)' \(shellQuote(out))
      """)
    let target = fixture.root + "/restored"
    let restored = try Command.run(Command.appbox, ["restore", out, "--device", "--backing", target])
    #expect(restored.status == 0, "\(restored.error)")
    #expect(restored.output.contains("not restored: \(Self.shared)"), "\(restored.output)")
    #expect(try directoryNames(target + "/Containers/Shared/AppGroup").isEmpty)
  }
}
