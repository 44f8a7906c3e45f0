import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `appbox backup` and `appbox restore` on real mounts, checked by readers written
/// independently of AppBox's writer (Python's `sqlite3`, `plistlib`, `hashlib`).
@Suite("Backup and restore", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct BackupTests {
  /// Apple's 61-byte value of `com.apple.metadata:com_apple_backup_excludeItem`.
  static let excludeItem = XattrTests.backupPlist
  static let modern = "com.apple.metadata:com_apple_backup_excludeItem"
  static let legacy = "com.apple.MobileBackup"

  /// Walks a tree (bytes paths) and prints, per item (path in hex): mode, whole-second
  /// mtime, link count, size and SHA-1 of a file, a symlink's target, the attributes a
  /// program lists (but the class) and the class.
  static let snapshotScript = """
    import hashlib, json, os, stat, sys
    root = os.fsencode(sys.argv[1])
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            entry = {"mode": st.st_mode, "mtime": int(st.st_mtime), "nlink": st.st_nlink}
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha1()
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        digest.update(chunk)
                entry["size"] = st.st_size
                entry["sha1"] = digest.hexdigest()
            if stat.S_ISLNK(st.st_mode):
                entry["target"] = os.readlink(path).hex()
            else:
                names = sorted(os.listxattr(path))
                entry["xattrs"] = {n: os.getxattr(path, n).hex() for n in names if n != "user.appbox.protection"}
                entry["class"] = os.getxattr(path, "user.appbox.protection").decode()
            out[os.path.relpath(path, root).hex()] = entry
    json.dump(out, sys.stdout)
    """

  /// An independent reader of an iOS backup: checks every fileID against SHA-1 of
  /// domain-path, the archive's shape, and each file's bytes against its recorded size;
  /// prints per path (hex) what it found.
  static let readerScript = """
    import hashlib, json, os, plistlib, sqlite3, sys
    backup = sys.argv[1]
    assert plistlib.load(open(os.path.join(backup, "Manifest.plist"), "rb"))["IsEncrypted"] is False
    for name in ("Info.plist", "Status.plist"):
        plistlib.load(open(os.path.join(backup, name), "rb"))
    db = sqlite3.connect(os.path.join(backup, "Manifest.db"))
    db.text_factory = bytes
    out = {}
    for file_id, domain, path, flags, blob in db.execute("SELECT fileID, domain, relativePath, flags, file FROM Files"):
        file_id = file_id.decode()
        assert file_id == hashlib.sha1(domain + b"-" + path).hexdigest(), (file_id, domain, path)
        archive = plistlib.loads(blob)
        assert archive["$archiver"] == "NSKeyedArchiver"
        objects = archive["$objects"]
        record = objects[1]
        assert objects[record["$class"].data]["$classname"] == "MBFile"
        assert isinstance(objects[record["RelativePath"].data], str)
        entry = {"domain": domain.decode(), "flags": flags, "mode": record["Mode"], "class": record["ProtectionClass"],
                 "size": record["Size"], "mtime": record["LastModified"]}
        if flags == 1:
            with open(os.path.join(backup, file_id[:2], file_id), "rb") as f:
                content = f.read()
            assert len(content) == record["Size"], (path, len(content), record["Size"])
            entry["sha1"] = hashlib.sha1(content).hexdigest()
        if flags == 4:
            entry["target"] = objects[record["Target"].data]
        if "ExtendedAttributes" in record:
            table = plistlib.loads(objects[record["ExtendedAttributes"].data]["NS.data"])
            entry["xattrs"] = {k: v.hex() for k, v in table.items()}
        out[path.hex()] = entry
    json.dump(out, sys.stdout)
    """

  static func hex(_ path: String) -> String { hex(Array(path.utf8)) }
  static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

  static func python(_ script: String, _ arguments: [String]) throws -> [String: [String: Any]] {
    let result = try Command.run("python3", ["-c", script] + arguments)
    guard result.status == 0 else { throw FixtureError("python3 exited \(result.status): \(result.error)") }
    return try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: [String: Any]] ?? [:]
  }

  static func appbox(_ arguments: [String]) throws -> CommandResult { try Command.run(Command.appbox, arguments) }

  static func setTimes(_ path: String, _ seconds: Int) {
    var times = [timespec(tv_sec: seconds, tv_nsec: 0), timespec(tv_sec: seconds, tv_nsec: 0)]
    _ = utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
  }

  @Test("round trip: what a device backs up comes back byte for byte with its metadata; the rest does not")
  func roundTrip() throws {
    let fixture = try MountFixture.unlocked(["--grace", "0"])
    let m = fixture.path
    // Every domain.
    for directory in [
      "Documents/dir", "Library/Application Support/db", "Library/Other", "Documents/exdir/sub",
      "Library/Application Support/legacydir",
    ] {
      try FileManager.default.createDirectory(atPath: m(directory), withIntermediateDirectories: true)
    }
    try writeFile(m("Documents/plain.txt"), bytes("plain"), mode: 0o640)
    #expect(setXattr(m("Documents/plain.txt"), "user.tag", bytes("blue")) == 0)
    #expect(setXattr(m("Documents/plain.txt"), "com.apple.lastuseddate#PS", [1, 2, 3]) == 0)
    try writeFile(m("Documents/dir/nested.bin"), pattern(10_000, seed: 1))
    try writeFile(m("Library/Application Support/db/store.sqlite"), pattern(5000, seed: 2))
    #expect(setXattr(m("Library/Application Support/db/store.sqlite"), "user.appbox.protection", bytes("B")) == 0)
    try writeFile(m("Library/Preferences/com.example.plist"), bytes("prefs"), mode: 0o600)
    try writeFile(m("Library/Other/x"), bytes("other"))
    try writeFile(m("Library/Caches/cached"), pattern(3000, seed: 3))
    try writeFile(m("tmp/scratch"), pattern(2000, seed: 4))
    // Excluded files and directories, by both names; a legacy 0 does not exclude.
    try writeFile(m("Documents/excluded-modern"), pattern(700, seed: 5))
    #expect(setXattr(m("Documents/excluded-modern"), Self.modern, Self.excludeItem) == 0)
    try writeFile(m("Documents/excluded-legacy"), pattern(800, seed: 6))
    #expect(setXattr(m("Documents/excluded-legacy"), Self.legacy, [1]) == 0)
    try writeFile(m("Documents/legacy-zero"), bytes("kept"))
    #expect(setXattr(m("Documents/legacy-zero"), Self.legacy, [0]) == 0)
    try writeFile(m("Documents/exdir/sub/deep"), pattern(900, seed: 7))
    #expect(setXattr(m("Documents/exdir"), Self.modern, Self.excludeItem) == 0)
    try writeFile(m("Library/Application Support/legacydir/f"), pattern(600, seed: 8))
    #expect(setXattr(m("Library/Application Support/legacydir"), Self.legacy, [1]) == 0)
    // The flag follows a rename; an atomic replace (temp file + rename) loses it.
    try writeFile(m("Documents/before-rename"), pattern(400, seed: 9))
    #expect(setXattr(m("Documents/before-rename"), Self.modern, Self.excludeItem) == 0)
    #expect(rename(m("Documents/before-rename"), m("Documents/renamed")) == 0)
    try writeFile(m("Documents/replaced"), bytes("old"))
    #expect(setXattr(m("Documents/replaced"), Self.modern, Self.excludeItem) == 0)
    try writeFile(m("Documents/replaced.tmp"), bytes("new contents"))
    #expect(rename(m("Documents/replaced.tmp"), m("Documents/replaced")) == 0)
    // Classes, a non-UTF-8 name, a symlink, hard links, a 1 GiB file.
    try writeFile(m("Documents/secret"), bytes("class A"))
    #expect(setXattr(m("Documents/secret"), "user.appbox.protection", bytes("complete")) == 0)
    try writeFile(m("Documents/open-data"), bytes("class D"))
    #expect(setXattr(m("Documents/open-data"), "user.appbox.protection", bytes("none")) == 0)
    let latin1: [UInt8] = Array(m("Documents/caf").utf8) + [0xE9]
    let fd = withRawPath(latin1) { open($0, O_WRONLY | O_CREAT | O_EXCL, 0o644) }
    #expect(fd >= 0)
    try writeAll(fd, bytes("latin-1 name"))
    close(fd)
    #expect(symlink("plain.txt", m("Documents/link")) == 0)
    try writeFile(m("Documents/hard1"), bytes("linked"))
    #expect(link(m("Documents/hard1"), m("Documents/hard2")) == 0)
    let large = try openFile(m("Documents/large.bin"), O_WRONLY | O_CREAT | O_TRUNC)
    var block = pattern(1 << 20, seed: 100)
    for chunk in 0..<1024 {  // every MiB its own: its number in its first bytes
      withUnsafeBytes(of: UInt64(chunk)) { block.replaceSubrange(0..<8, with: $0) }
      try writeAll(large, block)
    }
    close(large)
    for (path, seconds) in [
      ("Documents/plain.txt", 1_600_000_000), ("Documents/dir/nested.bin", 1_600_000_100),
      ("Documents/dir", 1_600_000_200), ("Documents/link", 1_600_000_300),
    ] {
      Self.setTimes(m(path), seconds)
    }
    let original = try Self.python(Self.snapshotScript, [fixture.mountpoint])

    // A locked device still backs up its class-A files.
    #expect(try Self.appbox(["lock", fixture.mountpoint]).status == 0)
    #expect(fixture.waitUntil { open(m("Documents/secret"), O_RDONLY) < 0 && errno == EPERM })
    let dryRun = try Self.appbox(["backup", "--dry-run", fixture.mountpoint, "--bundle-id", "com.example.roundtrip"])
    #expect(dryRun.status == 0, "\(dryRun.error)")
    let lines = dryRun.output.split(separator: "\n")
    #expect(
      lines.first == "largest backed-up files:"
        && lines.dropFirst().first?.hasSuffix("1 GiB  Documents/large.bin") == true)
    let backup = fixture.root + "/backup"
    let result = try Self.appbox([
      "backup", fixture.mountpoint, "--to", backup, "--bundle-id", "com.example.roundtrip", "--json",
    ])
    #expect(result.status == 0, "\(result.error)")
    let report = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
    let excluded = try #require(report["excluded"] as? [String: Any])
    #expect(excluded["files"] as? Int == 5)
    #expect(excluded["bytes"] as? Int == 700 + 800 + 900 + 600 + 400)
    #expect((report["caches"] as? [String: Any])?["bytes"] as? Int == 3000)
    #expect((report["tmp"] as? [String: Any])?["bytes"] as? Int == 2000)
    #expect((report["largest"] as? [[String: Any]])?.first?["path"] as? String == "Documents/large.bin")

    // What a backup holds, by the independent reader.
    let inBackup = try Self.python(Self.readerScript, [backup])
    let included = original.keys.filter { key in
      let path = String(decoding: Self.bytesOfHex(key), as: UTF8.self)
      return !path.hasPrefix("tmp") && !path.hasPrefix("Library/Caches") && !path.contains("exdir")
        && !path.contains("excluded-") && !path.contains("legacydir") && path != "Documents/renamed"
    }
    #expect(
      Set(inBackup.keys) == Set(included), "\(Set(inBackup.keys).symmetricDifference(included).map(Self.bytesOfHex))")
    let classNumbers = ["complete": 1, "completeUnlessOpen": 2, "completeUntilFirstUserAuthentication": 3, "none": 4]
    for key in included {
      let found = try #require(inBackup[key])
      let expected = try #require(original[key])
      #expect(found["domain"] as? String == "AppDomain-com.example.roundtrip")
      #expect(found["mode"] as? Int == expected["mode"] as? Int)
      #expect(found["mtime"] as? Int == expected["mtime"] as? Int)
      #expect(found["sha1"] as? String == expected["sha1"] as? String, "\(key)")
      #expect(found["size"] as? Int == (expected["size"] as? Int ?? 0))
      if let name = expected["class"] as? String { #expect(found["class"] as? Int == classNumbers[name], "\(key)") }
      #expect(
        found["target"] as? String
          == (expected["target"] as? String).map { String(decoding: Self.bytesOfHex($0), as: UTF8.self) })
      #expect(
        (found["xattrs"] as? [String: String] ?? [:]) == (expected["xattrs"] as? [String: String] ?? [:]), "\(key)")
    }
    try fixture.unmount()

    // Restored into a new sandbox.
    let restored = try MountFixture.unlocked { backing in
      try FileManager.default.removeItem(atPath: backing)
      let result = try Self.appbox(["restore", backup, "--backing", backing])
      #expect(result.status == 0, "\(result.error)")
    }
    let after = try Self.python(Self.snapshotScript, [restored.mountpoint])
    let expected = original.filter { included.contains($0.key) }.merging(
      [Self.hex("Library/Caches"): original[Self.hex("Library/Caches")]!, Self.hex("tmp"): original[Self.hex("tmp")]!]
    ) { a, _ in a }
    #expect(
      Set(after.keys) == Set(expected.keys),
      "\(Set(after.keys).symmetricDifference(expected.keys).map(Self.bytesOfHex))")
    for (key, want) in expected where after[key] != nil {
      let got = after[key]!
      let path = String(decoding: Self.bytesOfHex(key), as: UTF8.self)
      // A directory's link count counts its subdirectories, excluded ones too.
      for field in ["mode", "size", "sha1", "target", "class"] + (want["sha1"] != nil ? ["nlink"] : []) {
        #expect("\(got[field] ?? "-")" == "\(want[field] ?? "-")", "\(path) \(field)")
      }
      #expect((got["xattrs"] as? [String: String]) == (want["xattrs"] as? [String: String]), "\(path) xattrs")
      if path != "Library/Caches" && path != "tmp" && path != "Library" {
        #expect(got["mtime"] as? Int == want["mtime"] as? Int, "\(path) mtime")
      }
    }
    #expect(try statPath(restored.path("Documents/hard1")).st_ino == statPath(restored.path("Documents/hard2")).st_ino)
    try restored.unmount()
  }

  static func bytesOfHex(_ hex: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
      let next = hex.index(index, offsetBy: 2)
      out.append(UInt8(hex[index..<next], radix: 16)!)
      index = next
    }
    return out
  }

  @Test("a backup made while a writer appends to a Documents file holds a consistent copy of it")
  func appendingWriter() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/log")
    let fd = try openFile(path, O_WRONLY | O_CREAT | O_APPEND)
    // Records of 16 KiB, one write each, each a single request to the daemon and a single
    // write to the backing file, which the backing filesystem makes page by page: a copy
    // of the size `fstat` shows during one can end inside it. Records start on page
    // boundaries: the kernel's FUSE client sends a write that starts inside a page it has
    // not cached as two requests (measured: 92 + 8 bytes for 100 bytes at 8,100), so on
    // any FUSE mount a reader can see half of such a write.
    let record = 16_384
    @Sendable func line(_ n: Int) -> [UInt8] {
      let text = "record \(n) "
      return bytes(text + String(repeating: "x", count: record - 1 - text.utf8.count) + "\n")
    }
    // A head start (32 MiB), so that the copy takes a while.
    let head = 2048
    for start in stride(from: 0, to: head, by: 64) {
      try writeAll(fd, (start..<start + 64).flatMap(line))
    }
    let stop = StopFlag(false)
    let writer = Thread {
      var n = head
      while !stop.value {
        _ = line(n).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        n += 1
      }
    }
    writer.start()
    let backup = fixture.root + "/backup"
    let sizeBefore = try statPath(path).st_size
    let result = try Self.appbox([
      "backup", fixture.mountpoint, "--to", backup, "--bundle-id", "com.example.log", "--json",
    ])
    let sizeAfter = try statPath(path).st_size
    stop.value = true
    while !writer.isFinished { usleep(1000) }
    close(fd)
    #expect(result.status == 0, "\(result.error)")
    // The writer appended while the backup ran (whether during the file's copy itself
    // is up to the scheduler: the report says so when it was).
    #expect(sizeAfter > sizeBefore)
    let report = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
    #expect((report["skipped"] as? [String])?.isEmpty == true)
    let inBackup = try Self.python(Self.readerScript, [backup])
    let entry = try #require(inBackup[Self.hex("Documents/log")])
    let size = try #require(entry["size"] as? Int)
    #expect(size >= head * record && size % record == 0, "a torn copy: \(size) bytes: \(result.output)")
    // The copy is the file's first `size` bytes, whole records in order.
    let current = try readFile(path)
    #expect(current.count >= size)
    let digest = try Command.run(
      "python3",
      [
        "-c", "import hashlib,sys; print(hashlib.sha1(open(sys.argv[1],'rb').read(int(sys.argv[2]))).hexdigest())",
        path, "\(size)",
      ])
    #expect(digest.output.trimmingCharacters(in: .whitespacesAndNewlines) == entry["sha1"] as? String)
    try fixture.unmount()
  }

  /// Writes a backup as a device does (Python's plistlib with UIDs, not AppBox's
  /// writer): two apps, another domain, attributes in `NS.data`, a symlink, rows outside
  /// Documents and Library.
  static let deviceBackupScript = """
    import hashlib, os, plistlib, sqlite3, sys
    out = sys.argv[1]
    os.makedirs(out)
    db = sqlite3.connect(os.path.join(out, "Manifest.db"))
    db.executescript("CREATE TABLE Files (fileID TEXT PRIMARY KEY, domain TEXT, relativePath TEXT, flags INTEGER, file BLOB);"
                     "CREATE TABLE Properties (key TEXT PRIMARY KEY, value BLOB);")
    def archive(path, mode, size, cls, xattrs, target):
        objects = ["$null", None, path]
        record = {"Birth": 1600000000, "Flags": 0, "GroupID": 501, "InodeNumber": 1000 + len(path),
                  "LastModified": 1600000100, "LastStatusChange": 1600000200, "Mode": mode, "ProtectionClass": cls,
                  "RelativePath": plistlib.UID(2), "Size": size, "UserID": 501}
        if xattrs:
            objects.append({"NS.data": plistlib.dumps(xattrs, fmt=plistlib.FMT_BINARY), "$class": plistlib.UID(len(objects) + 1)})
            record["ExtendedAttributes"] = plistlib.UID(len(objects) - 1)
            objects.append({"$classname": "NSMutableData", "$classes": ["NSMutableData", "NSData", "NSObject"]})
        if target:
            record["Target"] = plistlib.UID(len(objects))
            objects.append(target)
        record["$class"] = plistlib.UID(len(objects))
        objects.append({"$classname": "MBFile", "$classes": ["MBFile", "NSObject"]})
        objects[1] = record
        return plistlib.dumps({"$version": 100000, "$archiver": "NSKeyedArchiver", "$top": {"root": plistlib.UID(1)},
                               "$objects": objects}, fmt=plistlib.FMT_BINARY)
    def add(domain, path, flags, mode, data=b"", cls=3, xattrs=None, target=None):
        file_id = hashlib.sha1((domain + "-" + path).encode()).hexdigest()
        db.execute("INSERT INTO Files VALUES (?, ?, ?, ?, ?)",
                   (file_id, domain, path, flags, archive(path, mode, len(data), cls, xattrs, target)))
        if flags == 1:
            os.makedirs(os.path.join(out, file_id[:2]), exist_ok=True)
            with open(os.path.join(out, file_id[:2], file_id), "wb") as f:
                f.write(data)
    one = "AppDomain-com.example.one"
    add(one, "", 2, 0o40755)
    add(one, "Documents", 2, 0o40755)
    add(one, "Documents/note.txt", 1, 0o100644, b"a note", cls=1,
        xattrs={"com.apple.lastuseddate#PS": b"\\x01\\x02", "user.k": b"v"})
    add(one, "Documents/link", 4, 0o120755, target="note.txt")
    add(one, "Library", 2, 0o40755)
    add(one, "Library/Preferences", 2, 0o40755)
    add(one, "Library/Preferences/com.example.one.plist", 1, 0o100600, b"prefs", cls=4)
    add(one, "Library/Caches/left.over", 1, 0o100644, b"cache")
    add(one, "SystemData/com.apple.SafariViewService/x", 1, 0o100644, b"system")
    add("AppDomain-com.example.two", "Documents/other", 1, 0o100644, b"two")
    add("HomeDomain", "Library/Preferences/x.plist", 1, 0o100644, b"home")
    db.commit()
    with open(os.path.join(out, "Manifest.plist"), "wb") as f:
        plistlib.dump({"IsEncrypted": False, "Version": "10.0"}, f, fmt=plistlib.FMT_BINARY)
    """

  @Test("a device's backup: the app is picked by bundle id, restored with its classes and attributes")
  func deviceBackup() throws {
    let directories = try SandboxDirectories()
    let backup = directories.root + "/device"
    let made = try Command.run("python3", ["-c", Self.deviceBackupScript, backup])
    #expect(made.status == 0, "\(made.error)")
    let target = directories.root + "/restored"
    let ambiguous = try Self.appbox(["restore", backup, "--backing", target])
    #expect(ambiguous.status == 64)
    #expect(
      ambiguous.error.contains("com.example.one") && ambiguous.error.contains("com.example.two"), "\(ambiguous.error)")
    #expect(!FileManager.default.fileExists(atPath: target))
    let fixture = try MountFixture.unlocked { backing in
      try FileManager.default.removeItem(atPath: backing)
      let result = try Self.appbox(["restore", backup, "--backing", backing, "--bundle-id", "com.example.one"])
      #expect(result.status == 0, "\(result.error)")
    }
    #expect(try readFile(fixture.path("Documents/note.txt")) == bytes("a note"))
    #expect(try getXattr(fixture.path("Documents/note.txt"), "user.appbox.protection") == bytes("complete"))
    #expect(try getXattr(fixture.path("Documents/note.txt"), "com.apple.lastuseddate#PS") == [1, 2])
    #expect(try getXattr(fixture.path("Documents/note.txt"), "user.k") == bytes("v"))
    #expect(try statPath(fixture.path("Documents/note.txt")).st_mtim.tv_sec == 1_600_000_100)
    #expect(
      try getXattr(fixture.path("Library/Preferences/com.example.one.plist"), "user.appbox.protection") == bytes("none")
    )
    #expect(try statPath(fixture.path("Library/Preferences/com.example.one.plist")).st_mode & 0o777 == 0o600)
    #expect(try readLink(fixture.path("Documents/link")) == "note.txt")
    #expect(try directoryNames(fixture.path("Library/Caches")).isEmpty)
    #expect(try directoryNames(fixture.mountpoint).sorted() == ["Documents", "Library", "tmp"])
    try fixture.unmount()
  }

  @Test("another user restores a read-only directory with its contents and its mode")
  func readOnlyDirectoryAsAnotherUser() throws {
    let fixture = try MountFixture.unlocked()
    try FileManager.default.createDirectory(atPath: fixture.path("Documents/ro"), withIntermediateDirectories: false)
    try writeFile(fixture.path("Documents/ro/f"), bytes("inside"))
    #expect(chmod(fixture.path("Documents/ro"), 0o555) == 0)
    #expect(chmod(fixture.root, 0o755) == 0)
    let backup = fixture.root + "/backup"
    #expect(try Self.appbox(["backup", fixture.mountpoint, "--to", backup]).status == 0)
    try fixture.unmount()
    // A backup is its owner's alone (0700, copies 0600) until the owner shares it.
    _ = try Command.shell("chmod -R go+rX \(shellQuote(backup))")
    let place = fixture.root + "/nobody"
    try FileManager.default.createDirectory(atPath: place, withIntermediateDirectories: false)
    #expect(chmod(place, 0o777) == 0)
    let result = try runAsNobody("\(Command.appbox) restore \(backup) --backing \(place)/restored")
    #expect(result.status == 0, "\(result.error)")
    #expect(try readFile(place + "/restored/Documents/ro/f") == bytes("inside"))
    #expect(try statPath(place + "/restored/Documents/ro").st_mode & 0o7777 == 0o555)
    #expect(try statPath(place + "/restored/Documents/ro/f").st_uid == 65534)
  }

  @Test("usage errors and bad values say what to do, with their exit codes")
  func commandLine() throws {
    let fixture = try MountFixture.unlocked()
    let mount = fixture.mountpoint
    let cases: [([String], Int32, String)] = [
      (["backup"], 64, "give one MOUNT"),
      (["backup", mount], 64, "--to DIR"),
      (["backup", "--dry-run", mount, "--to", fixture.root + "/x"], 64, "drop --to"),
      (["backup", mount, "--to", fixture.root + "/x", "--bundle-id", "a/b"], 65, "--bundle-id"),
      (["backup", fixture.root, "--to", fixture.root + "/x"], 66, "neither an AppBox mount"),
      (["backup", mount, "--to", fixture.root], 66, "not empty"),
      (["backup", mount, "--to", fixture.path("Documents/backup")], 66, "inside the sandbox"),
      (["backup", mount, "--to", fixture.backingPath("Documents/backup")], 66, "inside the sandbox"),
      (["restore", fixture.root], 64, "--backing DIR"),
      (["restore"], 64, "give one BACKUP"),
    ]
    for (arguments, status, message) in cases {
      let result = try Self.appbox(arguments)
      #expect(result.status == status, "\(arguments): \(result.error)")
      #expect(result.error.contains(message), "\(arguments): \(result.error)")
    }
    #expect(!FileManager.default.fileExists(atPath: fixture.path("Documents/backup")))
    try fixture.unmount()
  }

  static func sha1Hex(_ text: String) -> String {
    let result = try? Command.run(
      "python3", ["-c", "import hashlib,sys; print(hashlib.sha1(sys.argv[1].encode()).hexdigest())", text])
    return result?.output.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
  }
}

/// A flag shared with a writer thread.
final class StopFlag<Value>: @unchecked Sendable {
  // Safe: every access holds `lock`.
  private let lock = NSLock()
  private var stored: Value
  init(_ value: Value) { stored = value }
  var value: Value {
    get { lock.withLock { stored } }
    set { lock.withLock { stored = newValue } }
  }
}
