import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `appbox backup` and `appbox restore` as an attacker meets them (docs/reference.md's
/// trust model): backups private to their owner, restores that keep holes, grant no
/// set-ID bits, refuse before writing what cannot fit, and refuse hostile or inconsistent
/// backups with exit 65, leaving nothing behind. Backups of a backing directory that is
/// not mounted, and backups crafted by Python, so no mount is needed.
@Suite("Backup and restore: trust boundaries", .serialized, .timeLimit(.minutes(10)))
struct BackupTrustTests {
  static let domain = "AppDomain-com.example.hostile"

  /// Writes a backup as a device would (Python's sqlite3 and plistlib, not AppBox's
  /// writer) from a JSON list of rows: `path`, `flags`, `mode`, and optionally `data`
  /// (hex), `size`, `cls`, `inode`, `xattrs` (name → hex), `target`, `fileID`, `domain`,
  /// and `content`: `data` (default), `fill` (`size` random bytes), `sparse` (`size` bytes
  /// with hex `extents` at offsets), `fifo`, `symlink` or `bucket-symlink` (to `to`). The
  /// table has no keys, so rows may repeat a path. The rows come on standard input.
  static let builderScript = """
    import hashlib, json, os, plistlib, sqlite3, sys
    out, spec = sys.argv[1], json.load(sys.stdin)
    os.makedirs(out)
    db = sqlite3.connect(os.path.join(out, "Manifest.db"))
    db.executescript("CREATE TABLE Files (fileID TEXT, domain TEXT, relativePath TEXT, flags INTEGER, file BLOB);"
                     "CREATE TABLE Properties (key TEXT PRIMARY KEY, value BLOB);")
    def archive(row, size):
        objects = ["$null", None, row["path"]]
        record = {"Birth": 1600000000, "Flags": 0, "GroupID": 501, "InodeNumber": row.get("inode", 0),
                  "LastModified": 1600000100, "LastStatusChange": 1600000200, "Mode": row["mode"],
                  "ProtectionClass": row.get("cls", 3), "RelativePath": plistlib.UID(2), "Size": size, "UserID": 501}
        xattrs = {name: bytes.fromhex(value) for name, value in row.get("xattrs", {}).items()}
        if xattrs:
            objects.append({"NS.data": plistlib.dumps(xattrs, fmt=plistlib.FMT_BINARY), "$class": plistlib.UID(len(objects) + 1)})
            record["ExtendedAttributes"] = plistlib.UID(len(objects) - 1)
            objects.append({"$classname": "NSMutableData", "$classes": ["NSMutableData", "NSData", "NSObject"]})
        if "target" in row:
            record["Target"] = plistlib.UID(len(objects))
            objects.append(row["target"])
        record["$class"] = plistlib.UID(len(objects))
        objects.append({"$classname": "MBFile", "$classes": ["MBFile", "NSObject"]})
        objects[1] = record
        return plistlib.dumps({"$version": 100000, "$archiver": "NSKeyedArchiver", "$top": {"root": plistlib.UID(1)},
                               "$objects": objects}, fmt=plistlib.FMT_BINARY)
    for row in spec["rows"]:
        domain = row.get("domain", spec["domain"])
        file_id = row.get("fileID") or hashlib.sha1((domain + "-" + row["path"]).encode()).hexdigest()
        size = row.get("size", 0)
        if row["flags"] == 1:
            content = row.get("content", "data")
            bucket = os.path.join(out, file_id[:2])
            if content == "bucket-symlink":
                os.symlink(row["to"], bucket)
            else:
                os.makedirs(bucket, exist_ok=True)
            where = os.path.join(bucket, file_id)
            if content == "data":
                data = bytes.fromhex(row.get("data", ""))
                with open(where, "wb") as f:
                    f.write(data)
                size = row.get("size", len(data))
            elif content == "fill":
                with open(where, "wb") as f:
                    f.write(os.urandom(size))
            elif content == "sparse":
                with open(where, "wb") as f:
                    f.truncate(size)
                    for offset, hexdata in row["extents"]:
                        f.seek(offset)
                        f.write(bytes.fromhex(hexdata))
            elif content == "fifo":
                os.mkfifo(where)
            elif content == "symlink":
                os.symlink(row["to"], where)
        db.execute("INSERT INTO Files VALUES (?, ?, ?, ?, ?)", (file_id, domain, row["path"], row["flags"], archive(row, size)))
    db.commit()
    with open(os.path.join(out, "Manifest.plist"), "wb") as f:
        plistlib.dump({"IsEncrypted": False, "Version": "10.0"}, f, fmt=plistlib.FMT_BINARY)
    """

  /// A row of a crafted backup.
  static func row(_ path: String, _ flags: Int, _ mode: Int, _ extra: [String: Any] = [:]) -> [String: Any] {
    ["path": path, "flags": flags, "mode": mode].merging(extra) { $1 }
  }

  /// The rows every crafted backup starts with: the domain and its two top directories.
  static var base: [[String: Any]] {
    [row("", 2, 0o40755), row("Documents", 2, 0o40755), row("Library", 2, 0o40755)]
  }

  static func craft(_ rows: [[String: Any]], at path: String) throws {
    let spec = try JSONSerialization.data(withJSONObject: ["domain": domain, "rows": base + rows])
    let made = try Command.run("python3", ["-c", builderScript, path], input: spec)
    guard made.status == 0 else { throw FixtureError("the backup builder failed: \(made.error)") }
  }

  static func hex(_ text: String) -> String { BackupTests.hex(text) }
  static func hex(_ bytes: [UInt8]) -> String { BackupTests.hex(bytes) }

  /// Runs `appbox` with a deadline (a restore that blocks on a FIFO must fail, not hang).
  static func appbox(_ arguments: [String], directory: String? = nil) throws -> CommandResult {
    try Command.run("/usr/bin/timeout", ["-k", "10", "120", Command.appbox] + arguments, directory: directory)
  }

  /// A backing directory of a sandbox that is not mounted: `appbox backup` reads it as it is.
  static func sandbox(in root: String) throws -> String {
    let backing = root + "/sandbox"
    for directory in ["Documents", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp"] {
      try FileManager.default.createDirectory(atPath: backing + "/" + directory, withIntermediateDirectories: true)
    }
    return backing
  }

  /// Names under `root` that a backup or restore leaves while at work.
  static func stagingLeftovers(_ root: String) -> [String] {
    (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []).filter { $0.contains(".appbox-") }
  }

  // MARK: - Set-ID bits

  @Test("a restore never makes set-user-ID or set-group-ID files: a device's backup and AppBox's own")
  func restoreDropsSetIDBits() throws {
    let directories = try SandboxDirectories()
    let root = directories.root
    let crafted = root + "/crafted"
    try Self.craft(
      [
        Self.row("Documents/suid", 1, 0o104755, ["data": Self.hex("#!/bin/sh\n")]),
        Self.row("Documents/sgid", 1, 0o102755, ["data": Self.hex("x")]),
        Self.row("Documents/both", 1, 0o106750, ["data": Self.hex("y")]),
        Self.row("Documents/shared", 2, 0o43775),
        Self.row("Documents/plain", 1, 0o100644, ["data": Self.hex("z")]),
      ], at: crafted)
    let result = try Self.appbox(["restore", crafted, "--backing", root + "/restored"])
    #expect(result.status == 0, "\(result.error)")
    #expect(result.output.contains("set-user-ID and set-group-ID bits dropped from 4"), "\(result.output)")
    for (path, mode) in [
      ("Documents/suid", 0o755), ("Documents/sgid", 0o755), ("Documents/both", 0o750), ("Documents/shared", 0o1775),
      ("Documents/plain", 0o644),
    ] {
      #expect(try statPath(root + "/restored/" + path).st_mode & 0o7777 == mode, "\(path)")
    }
    // AppBox's own backup of a set-user-ID file restores it without the bit.
    let backing = try Self.sandbox(in: root)
    try writeFile(backing + "/Documents/tool", bytes("#!/bin/sh\n"))
    #expect(chmod(backing + "/Documents/tool", 0o4755) == 0)
    #expect(try Self.appbox(["backup", backing, "--to", root + "/own"]).status == 0)
    #expect(try Self.appbox(["restore", root + "/own", "--backing", root + "/own-restored"]).status == 0)
    #expect(try statPath(root + "/own-restored/Documents/tool").st_mode & 0o7777 == 0o755)
  }

  // MARK: - Privacy

  @Test("a backup is private to its owner: 0700, every copy 0600, whatever the sources' modes and the umask")
  func backupIsPrivate() throws {
    let directories = try SandboxDirectories()
    let root = directories.root
    #expect(chmod(root, 0o755) == 0)
    let backing = try Self.sandbox(in: root)
    try writeFile(backing + "/Documents/secret", bytes("0600"), mode: 0o600)
    try writeFile(backing + "/Documents/none", bytes("0000"), mode: 0o600)
    #expect(chmod(backing + "/Documents/none", 0) == 0)
    try writeFile(backing + "/Documents/classA", bytes("class A, 0644"))
    #expect(chmod(backing + "/Documents/classA", 0o644) == 0)
    #expect(setXattr(backing + "/Documents/classA", "user.appbox.protection", bytes("complete")) == 0)
    try writeFile(backing + "/Library/Preferences/p.plist", bytes("prefs"))
    let backup = root + "/backup"
    let result = try Command.run(
      "/bin/sh",
      ["-c", "umask 000; exec \(shellQuote(Command.appbox)) backup \(shellQuote(backing)) --to \(shellQuote(backup))"])
    #expect(result.status == 0, "\(result.error)")
    #expect(try statPath(backup).st_mode & 0o7777 == 0o700)
    var files = 0
    for relative in FileManager.default.enumerator(atPath: backup)?.allObjects as? [String] ?? [] {
      let st = try lstatPath(backup + "/" + relative)
      let expected: mode_t = fileType(st) == S_IFDIR ? 0o700 : 0o600
      #expect(st.st_mode & 0o7777 == expected, "\(relative): \(String(st.st_mode & 0o7777, radix: 8))")
      if fileType(st) == S_IFREG { files += 1 }
    }
    #expect(files == 4 + 4, "Manifest.db, three plists and the four copies")
    // Another user reads nothing, even with the backup's directory opened up.
    #expect(chmod(backup, 0o755) == 0)
    let peek = try runAsNobody("cat \(shellQuote(backup))/*/* \(shellQuote(backup))/Manifest.db")
    #expect(peek.status != 0 && !peek.output.contains("0600") && !peek.output.contains("class A"), "\(peek.output)")
    #expect(Self.stagingLeftovers(root).isEmpty)
  }

  // MARK: - Sparse files and space

  @Test("a 1 GiB sparse file stays sparse in the backup and again when restored")
  func sparseRoundTrip() throws {
    let directories = try SandboxDirectories()
    let root = directories.root
    let backing = try Self.sandbox(in: root)
    let sparse = backing + "/Documents/sparse"
    let fd = try openFile(sparse, O_WRONLY | O_CREAT | O_TRUNC)
    let size: off_t = 1 << 30
    let extents: [(off_t, [UInt8])] = [
      (0, pattern(4096, seed: 1)), (512 << 20, pattern(65536, seed: 2)), (size - 4096, pattern(4096, seed: 3)),
    ]
    for (offset, data) in extents { try writeAll(fd, data, at: offset) }
    #expect(ftruncate(fd, size) == 0)
    close(fd)
    #expect(try Self.appbox(["backup", backing, "--to", root + "/backup"]).status == 0)
    let id = BackupTests.sha1Hex("AppDomain-local.appbox.sandbox-Documents/sparse")
    let copy = try statPath(root + "/backup/" + id.prefix(2) + "/" + id)
    #expect(copy.st_size == size)
    #expect(Int(copy.st_blocks) * 512 < 4 << 20, "the copy allocates \(copy.st_blocks * 512) bytes")
    let result = try Self.appbox(["restore", root + "/backup", "--backing", root + "/restored"])
    #expect(result.status == 0, "\(result.error)")
    let restored = root + "/restored/Documents/sparse"
    let st = try statPath(restored)
    #expect(st.st_size == size)
    #expect(Int(st.st_blocks) * 512 < 4 << 20, "the restored file allocates \(st.st_blocks * 512) bytes")
    let reader = try openFile(restored, O_RDONLY)
    defer { close(reader) }
    for (offset, data) in extents { #expect(try readAt(reader, count: data.count, offset: offset) == data) }
    #expect(try readAt(reader, count: 4096, offset: 256 << 20) == [UInt8](repeating: 0, count: 4096))
  }

  /// Mounts a small tmpfs at `path` (as root; a container has no loop devices).
  static func smallFilesystem(_ path: String, options: String) throws {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    _ = try Command.shell("mount -t tmpfs -o \(options),mode=0755 appbox-restore-target \(shellQuote(path))")
  }

  @Test(
    "a restore that cannot fit is refused before it writes anything: free space, inodes, --capacity; holes need none",
    .enabled(if: geteuid() == 0, "mounts tmpfs filesystems"))
  func restoreThatCannotFitIsRefused() throws {
    let directories = try SandboxDirectories()
    let root = directories.root
    let backup = root + "/backup"
    // 12 MiB of data in three files, and a 1 GiB file holding 1 MiB.
    try Self.craft(
      (0..<3).map { Self.row("Documents/full\($0)", 1, 0o100644, ["content": "fill", "size": 4 << 20]) },
      at: backup)
    let sparse = root + "/sparse"
    try Self.craft(
      [
        Self.row(
          "Documents/huge", 1, 0o100644,
          ["content": "sparse", "size": 1 << 30, "extents": [[0, Self.hex(pattern(1 << 20, seed: 9))]]])
      ], at: sparse)
    let small = root + "/small"
    try Self.smallFilesystem(small, options: "size=8m")
    defer { _ = try? Command.run("/usr/bin/umount", [small]) }

    let refused = try Self.appbox(["restore", backup, "--backing", small + "/restored"])
    #expect(refused.status == 71, "\(refused.error)")
    #expect(refused.error.contains("free"), "\(refused.error)")
    #expect(try directoryNames(small).isEmpty, "nothing written")
    // A sparse file needs only its data.
    let fits = try Self.appbox(["restore", sparse, "--backing", small + "/restored"])
    #expect(fits.status == 0, "\(fits.error)")
    let huge = try statPath(small + "/restored/Documents/huge")
    #expect(huge.st_size == 1 << 30 && Int(huge.st_blocks) * 512 <= 2 << 20)
    // The sandbox's capacity, when given.
    let capacity = try Self.appbox(["restore", backup, "--backing", root + "/roomy", "--capacity", "8M"])
    #expect(capacity.status == 65 && capacity.error.contains("--capacity"), "\(capacity.error)")
    #expect(!FileManager.default.fileExists(atPath: root + "/roomy"))
    #expect(try Self.appbox(["restore", backup, "--backing", root + "/roomy", "--capacity", "20M"]).status == 0)
    // Inodes.
    let many = root + "/many"
    try Self.craft((0..<40).map { Self.row("Documents/f\($0)", 1, 0o100644) }, at: many)
    let few = root + "/few"
    try Self.smallFilesystem(few, options: "size=8m,nr_inodes=32")
    defer { _ = try? Command.run("/usr/bin/umount", [few]) }
    let noInodes = try Self.appbox(["restore", many, "--backing", few + "/restored"])
    #expect(noInodes.status == 71 && noInodes.error.contains("room for"), "\(noInodes.error)")
    #expect(try directoryNames(few).isEmpty)
  }

  // MARK: - Hostile and inconsistent backups

  @Test("bad or truncated backups get a clear error and leave nothing behind")
  func badBackups() throws {
    let directories = try SandboxDirectories()
    let backup = directories.root + "/device"
    #expect(try Command.run("python3", ["-c", BackupTests.deviceBackupScript, backup]).status == 0)
    let target = directories.root + "/restored"
    func leftovers() throws -> [String] {
      try FileManager.default.contentsOfDirectory(atPath: directories.root).filter { $0.contains("restored") }
    }
    // Truncated: a file's bytes are shorter than the manifest says.
    let noteID = BackupTests.sha1Hex("AppDomain-com.example.one-Documents/note.txt")
    let note = backup + "/" + noteID.prefix(2) + "/" + noteID
    #expect(truncate(note, 2) == 0)
    var result = try BackupTests.appbox(["restore", backup, "--backing", target, "--bundle-id", "com.example.one"])
    #expect(result.status == 65)
    #expect(result.error.contains("truncated") && result.error.contains("Documents/note.txt"), "\(result.error)")
    #expect(try leftovers().isEmpty)
    // Missing bytes.
    #expect(unlink(note) == 0)
    result = try BackupTests.appbox(["restore", backup, "--backing", target, "--bundle-id", "com.example.one"])
    #expect(result.status == 65 && result.error.contains("missing"), "\(result.error)")
    #expect(try leftovers().isEmpty)
    // A database that is not SQLite.
    try writeFile(backup + "/Manifest.db", bytes("SQLite format 3\0garbage"))
    result = try BackupTests.appbox(["restore", backup, "--backing", target, "--bundle-id", "com.example.one"])
    #expect(result.status == 65 && result.error.contains("Manifest.db"), "\(result.error)")
    #expect(try leftovers().isEmpty)
    // Encrypted.
    try writeFile(
      backup + "/Manifest.plist",
      bytes(
        "<?xml version=\"1.0\"?><plist version=\"1.0\"><dict><key>IsEncrypted</key><true/></dict></plist>"))
    result = try BackupTests.appbox(["restore", backup, "--backing", target])
    #expect(result.status == 65 && result.error.contains("encrypted"), "\(result.error)")
    // Not a backup at all; a target that is not empty.
    result = try BackupTests.appbox(["restore", directories.root, "--backing", target])
    #expect(result.status == 65 && result.error.contains("Manifest.plist"), "\(result.error)")
    #expect(try leftovers().isEmpty)
  }

  @Test("unknown ProtectionClass numbers are refused; 0 means none, 7 is completeWhenUserInactive")
  func unknownProtectionClass() throws {
    let directories = try SandboxDirectories()
    for number in [5, 6, 99, -1] {
      let backup = directories.root + "/class\(number)"
      try Self.craft([Self.row("Documents/f", 1, 0o100644, ["data": Self.hex("f"), "cls": number])], at: backup)
      let result = try Self.appbox(["restore", backup, "--backing", directories.root + "/r\(number)"])
      #expect(result.status == 65, "\(number): \(result.error)")
      #expect(result.error.contains("ProtectionClass \(number)"), "\(result.error)")
      #expect(!FileManager.default.fileExists(atPath: directories.root + "/r\(number)"))
    }
    let backup = directories.root + "/known"
    try Self.craft(
      [
        Self.row("Documents/none", 1, 0o100644, ["data": Self.hex("0"), "cls": 0]),
        Self.row("Documents/cx", 1, 0o100644, ["data": Self.hex("7"), "cls": 7]),
      ], at: backup)
    let result = try Self.appbox(["restore", backup, "--backing", directories.root + "/known-restored"])
    #expect(result.status == 0, "\(result.error)")
    let restored = directories.root + "/known-restored/Documents/"
    #expect(throws: (any Error).self) { try getXattr(restored + "none", "user.appbox.protection") }
    #expect(try getXattr(restored + "cx", "user.appbox.protection") == bytes("completeWhenUserInactive"))
  }

  /// Hostile or inconsistent backups: each is refused with exit 65 and a message naming
  /// what is wrong, and leaves nothing behind (no target, no staging directory, nothing
  /// outside).
  static var hostile: [(name: String, rows: [[String: Any]], message: String)] {
    [
      (
        "a path given twice",
        [row("Documents/a", 1, 0o100644, ["data": hex("1")]), row("Documents/a", 1, 0o100600, ["data": hex("2")])],
        "twice"
      ),
      ("a directory given twice", [row("Documents/d", 2, 0o40755), row("Documents/d", 2, 0o40700)], "twice"),
      (
        "a file in place of Documents", [row("Documents", 1, 0o100644, ["data": hex("x")])], "sandbox's own directories"
      ),
      (
        "a symlink in place of Library/Preferences", [row("Library/Preferences", 4, 0o120777, ["target": "OUTSIDE"])],
        "sandbox's own directories"
      ),
      ("a name of 300 bytes", [row("Documents/" + String(repeating: "n", count: 300), 1, 0o100644)], "300 bytes"),
      (
        "an attribute value of 70,000 bytes",
        [row("Documents/a", 1, 0o100644, ["xattrs": ["user.big": hex([UInt8](repeating: 1, count: 70_000))]])],
        "70000 bytes"
      ),
      (
        "an attribute name of 300 bytes",
        [row("Documents/a", 1, 0o100644, ["xattrs": ["user." + String(repeating: "x", count: 300): "01"]])],
        "longer than 255"
      ),
      (
        "an attribute name with a NUL, which would reach AppBox's own class attribute",
        [row("Documents/a", 1, 0o100644, ["xattrs": ["user.appbox.protection\u{0}x": hex("none")]])],
        "attribute named"
      ),
      (
        "files written through a symlink row",
        [
          row("Documents/evil", 4, 0o120777, ["target": "OUTSIDE"]),
          row("Documents/evil/pwned", 1, 0o100644, ["data": hex("pwned")]),
        ],
        "lies below"
      ),
      (
        "a path that climbs out", [row("Documents/../../pwned", 1, 0o100644, ["data": hex("x")])], "not a relative path"
      ),
      (
        "a symlink target of 5,000 bytes",
        [row("Documents/l", 4, 0o120777, ["target": String(repeating: "t/", count: 2500)])], "Target"
      ),
      (
        "a tree 3,000 levels deep",
        [row("Documents/" + Array(repeating: "d", count: 3000).joined(separator: "/"), 2, 0o40755)], "levels deep"
      ),
      (
        "bytes read through a symlinked bucket directory",
        [row("Documents/stolen", 1, 0o100644, ["content": "bucket-symlink", "to": "SECRETS", "size": 6])],
        "symlink"
      ),
      (
        "bytes that are a FIFO", [row("Documents/fifo", 1, 0o100644, ["content": "fifo"])], "not a regular file"
      ),
      ("a negative size", [row("Documents/neg", 1, 0o100644, ["size": -1])], "size -1"),
    ]
  }

  @Test(
    "hostile or inconsistent backups exit 65 with what is wrong, and leave nothing behind",
    arguments: hostile.indices)
  func hostileBackup(_ index: Int) throws {
    let (name, template, message) = Self.hostile[index]
    let directories = try SandboxDirectories()
    let root = directories.root
    let outside = root + "/outside"
    let secrets = root + "/secrets"
    try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: secrets, withIntermediateDirectories: true)
    let stolenID = BackupTests.sha1Hex(Self.domain + "-Documents/stolen")
    try writeFile(secrets + "/" + stolenID, bytes("secret"))
    let rows = template.map { row in
      row.mapValues { value -> Any in
        guard let text = value as? String else { return value }
        return text.replacingOccurrences(of: "OUTSIDE", with: outside).replacingOccurrences(
          of: "SECRETS", with: secrets)
      }
    }
    let backup = root + "/backup"
    try Self.craft(rows, at: backup)
    let target = root + "/work/restored"
    try FileManager.default.createDirectory(atPath: root + "/work", withIntermediateDirectories: true)
    let result = try Self.appbox(["restore", backup, "--backing", target])
    #expect(result.status == 65, "\(name): exit \(result.status): \(result.error)")
    #expect(result.error.contains(message), "\(name): \(result.error)")
    #expect(try directoryNames(root + "/work").isEmpty, "\(name): left behind")
    #expect(try directoryNames(outside).isEmpty, "\(name): written outside")
  }

  @Test(
    "another user restores a hard link into a directory of mode 0000: directory modes come last",
    .enabled(if: geteuid() == 0, "restores as another user"))
  func hardLinkIntoClosedDirectory() throws {
    let directories = try SandboxDirectories()
    let root = directories.root
    #expect(chmod(root, 0o755) == 0)
    let backup = root + "/backup"
    try Self.craft(
      [
        Self.row("Documents/closed", 2, 0o40000),
        Self.row("Documents/closed/a", 1, 0o100644, ["data": Self.hex("linked"), "inode": 7]),
        Self.row("Documents/z", 1, 0o100644, ["data": Self.hex("linked"), "inode": 7]),
      ], at: backup)
    _ = try Command.shell("chmod -R go+rX \(shellQuote(backup))")
    let place = root + "/nobody"
    try FileManager.default.createDirectory(atPath: place, withIntermediateDirectories: false)
    #expect(chmod(place, 0o777) == 0)
    let result = try runAsNobody(
      "\(shellQuote(Command.appbox)) restore \(shellQuote(backup)) --backing \(place)/restored")
    #expect(result.status == 0, "\(result.error)")
    #expect(try statPath(place + "/restored/Documents/closed").st_mode & 0o7777 == 0)
    #expect(try statPath(place + "/restored/Documents/z").st_nlink == 2)
    #expect(
      try statPath(place + "/restored/Documents/z").st_ino == statPath(place + "/restored/Documents/closed/a").st_ino)
  }

  @Test("a class attribute that cannot be parsed is backed up as complete, the strictest class")
  func unparsableClassBackedUpAsComplete() throws {
    let directories = try SandboxDirectories()
    let backing = try Self.sandbox(in: directories.root)
    try writeFile(backing + "/Documents/odd", bytes("odd"))
    #expect(setXattr(backing + "/Documents/odd", "user.appbox.protection", bytes("Complete ")) == 0)
    let backup = directories.root + "/backup"
    #expect(try Self.appbox(["backup", backing, "--to", backup]).status == 0)
    let found = try BackupTests.python(BackupTests.readerScript, [backup])
    #expect(found[Self.hex("Documents/odd")]?["class"] as? Int == 1)
  }

  @Test("trees as deep as a restore makes (2048 levels) round-trip; deeper items are left out, reported, exit 1")
  func deepTrees() throws {
    let directories = try SandboxDirectories()
    let root = directories.root
    let backing = try Self.sandbox(in: root)
    // Deeper than a path can name: made one directory at a time, relative to the last.
    let made = try Command.run(
      "python3",
      [
        "-c",
        """
        import os, sys
        for top, depth in (("ok", 2046), ("deep", 2100)):
            fd = os.open(os.path.join(sys.argv[1], "Documents"), os.O_RDONLY)
            for level in range(depth):
                name = top if level == 0 else "d"
                os.mkdir(name, dir_fd=fd)
                next_fd = os.open(name, os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = next_fd
            os.close(os.open("bottom", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
            os.close(fd)
        """, backing,
      ])
    #expect(made.status == 0, "\(made.error)")
    let backup = root + "/backup"
    let result = try Self.appbox(["backup", backing, "--to", backup, "--json"])
    #expect(result.status == 1, "\(result.error)")
    #expect(result.error.contains("deeper than 2048"), "\(result.error)")
    let report = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
    let tooDeep = try #require(report["tooDeep"] as? [String])
    #expect(
      tooDeep.count == 1 && tooDeep[0].hasPrefix("Documents/deep/d/") && tooDeep[0].split(separator: "/").count == 2049)
    let restored = try Self.appbox(["restore", backup, "--backing", root + "/restored"])
    #expect(restored.status == 0, "\(restored.error)")
    let found = try Command.run(
      "python3",
      [
        "-c",
        """
        import os, sys
        fd = os.open(os.path.join(sys.argv[1], "Documents"), os.O_RDONLY)
        for name in ["ok"] + ["d"] * 2045:
            next_fd = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        print(os.listdir(fd))
        """, root + "/restored",
      ])
    #expect(found.output.contains("bottom"), "\(found.error)")
  }

  // MARK: - Paths

  @Test("odd paths: '.', './', trailing slashes, '..', empty, root, symlinks, long names get a result or a clear error")
  func oddPaths() throws {
    let directories = try SandboxDirectories()
    let root = directories.root
    let backing = try Self.sandbox(in: root)
    try writeFile(backing + "/Documents/f", bytes("f"))
    let backup = root + "/backup"
    #expect(try Self.appbox(["backup", backing, "--to", backup]).status == 0)
    for directory in ["e1", "e2", "e3", "e4", "r1", "r2", "r3", "r4", "sub"] {
      try FileManager.default.createDirectory(atPath: root + "/" + directory, withIntermediateDirectories: false)
    }
    try writeFile(root + "/file", bytes("a file"))
    #expect(symlink(root + "/e4", root + "/to-e4") == 0)
    #expect(symlink(root + "/nowhere", root + "/dangling") == 0)
    let longName = String(repeating: "n", count: 300)
    let longPath = String(repeating: "p/", count: 2500) + "x"
    // (arguments, working directory below root, exit status, what the message or the result holds)
    let cases: [([String], String, Int32, String)] = [
      (["backup", backing, "--to", "."], "e1", 0, "e1/Manifest.db"),
      (["backup", backing, "--to", "./"], "e2", 0, "e2/Manifest.db"),
      (["backup", backing, "--to", "e3/"], "", 0, "e3/Manifest.db"),
      (["backup", backing, "--to", "new/"], "", 0, "new/Manifest.db"),
      (["backup", backing, "--to", "to-e4"], "", 0, "e4/Manifest.db"),
      (["backup", backing, "--to", "sub/.."], "", 66, "not empty"),
      (["backup", backing, "--to", "missing/.."], "", 66, "does not exist"),
      (["backup", backing, "--to", "missing/x"], "", 66, "does not exist"),
      (["backup", backing, "--to", ""], "", 64, "--to"),
      (["backup", backing, "--to", "/"], "", 66, "root directory"),
      (["backup", backing, "--to", "dangling"], "", 66, "symlink to nothing"),
      (["backup", backing, "--to", "file"], "", 66, "not a directory"),
      (["backup", backing, "--to", "file/x"], "", 66, "not a directory"),
      (["backup", backing, "--to", longName], "", 66, "too long"),
      (["backup", backing, "--to", longPath], "", 66, "too long"),
      (["backup", ".", "--dry-run"], "sandbox", 0, ""),
      (["backup", "sandbox/.", "--dry-run"], "", 0, ""),
      (["backup", "sandbox//", "--dry-run"], "", 0, ""),
      (["backup", "", "--dry-run"], "", 64, "MOUNT"),
      (["restore", backup, "--backing", "."], "r1", 0, "r1/Documents"),
      (["restore", backup, "--backing", "./"], "r2", 0, "r2/Documents"),
      (["restore", backup + "/", "--backing", "r3/"], "", 0, "r3/Documents"),
      (["restore", backup + "/.", "--backing", "r4/."], "", 0, "r4/Documents"),
      (["restore", backup, "--backing", ".."], "sub", 66, "not empty"),
      (["restore", backup, "--backing", "/"], "", 66, "root directory"),
      (["restore", backup, "--backing", ""], "", 64, "--backing"),
      (["restore", "", "--backing", "r9"], "", 64, "BACKUP"),
      (["restore", backup, "--backing", longPath], "", 66, "too long"),
    ]
    for (arguments, directory, status, expected) in cases {
      let result = try Self.appbox(arguments, directory: root + "/" + directory)
      let label = "\(arguments.map { $0.prefix(40) }) in \(directory.isEmpty ? "." : directory)"
      #expect(result.status == status, "\(label): exit \(result.status): \(result.error.prefix(400))")
      if status == 0 {
        if !expected.isEmpty { #expect(FileManager.default.fileExists(atPath: root + "/" + expected), "\(label)") }
      } else {
        #expect(result.error.hasPrefix("appbox: ") && result.error.contains(expected), "\(label): \(result.error)")
      }
    }
    #expect(try readLink(root + "/to-e4") == root + "/e4", "the symlink stays a symlink")
    #expect(Self.stagingLeftovers(root).isEmpty, "\(Self.stagingLeftovers(root))")
  }
}
