import Posix
import PropertyLists
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxBackup

#if canImport(Glibc)
  import Glibc
#endif

/// A backup made by hand, as a device or an attacker would: rows in `Manifest.db`,
/// records archived by ``BackupFileRecord``, bytes where the layout puts them.
final class ForgedBackup {
  static let domain = "AppDomain-com.example.forged"
  let path: String
  private let database: ManifestDatabase

  init(
    at path: String, manifest: PropertyList = .dictionary([("IsEncrypted", .boolean(false))]),
    format: PropertyList.Format = .binary
  )
    throws
  {
    self.path = path
    try Sys.mkdir(path, 0o700)
    try Scratch.write(path + "/Manifest.plist", manifest.encoded(as: format))
    database = try Manifests.create(path + "/Manifest.db")
    for directory in ["Documents", "Library"] { try add(directory, .directory) }
  }

  /// Adds a row; a file's bytes go where its id says unless `bytes` is nil.
  func add(
    _ relativePath: String, _ kind: BackupFileRecord.Kind, mode: UInt32? = nil, bytes: [UInt8]? = [],
    size: Int64? = nil, protection: Int64 = 3, inode: UInt64 = 0, attributes: [(name: [UInt8], value: [UInt8])] = [],
    target: String? = nil, fileID: String? = nil
  ) throws {
    let path = Array(relativePath.utf8)
    let defaultMode: UInt32 = kind == .file ? 0o100644 : kind == .directory ? 0o40755 : 0o120777
    let record = BackupFileRecord(
      relativePath: path, kind: kind, mode: mode ?? defaultMode, userID: 501, groupID: 501,
      size: size ?? Int64(bytes?.count ?? 0), inode: inode, birth: 1_600_000_000, lastModified: 1_600_000_100,
      lastStatusChange: 1_600_000_200, protectionClass: protection, extendedAttributes: attributes,
      target: target.map { Array($0.utf8) })
    let id = fileID ?? BackupLayout.fileID(domain: Self.domain, relativePath: path)
    try database.insert(
      fileID: id, domain: Self.domain, relativePath: path, flags: kind.rawValue, file: record.archive())
    if kind == .file, let bytes {
      let bucket = self.path + "/" + id.prefix(2)
      if (try? Sys.lstatPath(bucket)) == nil { try Sys.mkdir(bucket, 0o700) }  // absent: make it
      try Scratch.write(bucket + "/" + id, bytes)
    }
  }

  /// Where a file's bytes go.
  func contentPath(_ relativePath: String) -> String {
    path + "/"
      + BackupLayout.contentPath(
        fileID: BackupLayout.fileID(domain: Self.domain, relativePath: Array(relativePath.utf8)))
  }

  func finish() throws { try database.commit() }

  /// Restores into `target`.
  static func restore(_ backup: String, into target: String, capacity: Int64? = nil) throws -> BackupRestorer.Summary {
    let restorer = BackupRestorer(backup: backup)
    let (database, domains) = try restorer.open()
    return try restorer.restore(
      database, domain: domains[0], into: TargetDirectory.resolve(target, option: "--backing"), capacity: capacity)
  }
}

@Suite("The backup engine on plain directories: no command line, no mount")
struct BackupEngineTests {
  static func times(_ path: String, _ seconds: Int) {
    var times = [timespec(tv_sec: seconds, tv_nsec: 0), timespec(tv_sec: seconds, tv_nsec: 0)]
    _ = utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
  }

  @Test(
    "backed up and restored: bytes, holes, modes without set-ID bits, times, classes, attributes, links; private; what is left out"
  )
  func roundTrip() throws {
    let scratch = try Scratch()
    let sandbox = try scratch.sandbox()
    let documents = sandbox + "/Documents/"
    try Scratch.write(documents + "a", Array("alpha".utf8), mode: 0o640)
    try Xattr.set(path: documents + "a", name: "user.tag", value: [1, 2])
    try Xattr.set(path: documents + "a", name: "user.appbox.x.com.apple.lastuseddate#PS", value: [3])
    try Scratch.write(documents + "tool", Array("#!/bin/sh\n".utf8))
    try Sys.chmod(documents + "tool", 0o4755)
    let sparse = try Sys.open(documents + "sparse", O_WRONLY | O_CREAT, 0o600)
    _ = try pattern(4096, seed: 1).withUnsafeBytes { (b) throws(Errno) in try Sys.pwrite(sparse, b, 4 << 20) }
    try Sys.ftruncate(sparse, 8 << 20)
    Sys.close(sparse)
    try Sys.mkdir(documents + "dir", 0o750)
    try Scratch.write(documents + "dir/f", Array("in dir".utf8))
    #expect(symlink("a", documents + "link") == 0)
    try Scratch.write(documents + "h1", Array("linked".utf8))
    #expect(link(documents + "h1", documents + "h2") == 0)
    try Scratch.write(documents + "excluded", Array("not backed up".utf8))
    try Xattr.set(path: documents + "excluded", name: "user.appbox.x.com.apple.MobileBackup", value: [1])
    try Scratch.write(sandbox + "/Library/Preferences/p", Array("prefs".utf8))
    try Xattr.set(path: sandbox + "/Library/Preferences/p", name: "user.appbox.protection", value: Array("none".utf8))
    try Scratch.write(sandbox + "/Library/Caches/c", Array("cache".utf8))
    try Scratch.write(sandbox + "/tmp/t", Array("scratch".utf8))
    Self.times(documents + "a", 1_600_000_000)
    Self.times(documents + "dir", 1_600_000_500)

    var progressed = 0
    let writer = BackupWriter(backing: sandbox, bundleID: "com.example.engine", dryRun: false) { _, _ in progressed += 1
    }
    let report = try writer.run(destination: TargetDirectory.resolve(scratch("backup"), option: "--to"))
    #expect(progressed > 0)
    #expect(report.included.files == 7)
    #expect(report.excluded.files == 1 && report.caches.files == 1 && report.tmp.files == 1)
    #expect(try Scratch.status(scratch("backup")).st_mode & 0o7777 == 0o700)
    for name in try Scratch.names(scratch("backup")) {
      let st = try Scratch.status(scratch("backup/" + name))
      #expect(st.st_mode & 0o7777 == (st.st_mode & S_IFMT == S_IFDIR ? 0o700 : 0o600), "\(name)")
    }

    let summary = try ForgedBackup.restore(scratch("backup"), into: scratch("restored"))
    #expect(summary.files == 7 && summary.symlinks == 1 && summary.setIDDropped == 1 && summary.excluded == 0)
    let restored = scratch("restored/Documents/")
    #expect(try Scratch.read(restored + "a") == Array("alpha".utf8))
    #expect(try Scratch.status(restored + "a").st_mode & 0o7777 == 0o640)
    #expect(try Scratch.status(restored + "a").st_mtim.tv_sec == 1_600_000_000)
    #expect(try Xattr.value(Sys.open(restored + "a", O_RDONLY), name: "user.tag") == [1, 2])
    #expect(try Scratch.status(restored + "tool").st_mode & 0o7777 == 0o755)
    #expect(try Scratch.status(restored + "dir").st_mode & 0o7777 == 0o750)
    #expect(try Scratch.status(restored + "dir").st_mtim.tv_sec == 1_600_000_500)
    let sparseCopy = try Scratch.status(restored + "sparse")
    #expect(sparseCopy.st_size == 8 << 20 && Int(sparseCopy.st_blocks) * 512 <= 64 << 10)
    #expect(try Sys.readlink(Sys.open(restored + "link", Linux.openPath | O_NOFOLLOW)) == Array("a".utf8))
    #expect(try Scratch.status(restored + "h1").st_ino == Scratch.status(restored + "h2").st_ino)
    #expect(try !Scratch.names(restored).contains("excluded"))
    let prefs = try Sys.open(scratch("restored/Library/Preferences/p"), O_RDONLY)
    defer { Sys.close(prefs) }
    #expect(try Xattr.value(prefs, name: "user.appbox.protection") == Array("none".utf8))
    #expect(try Scratch.names(scratch("restored/Library/Caches")).isEmpty)
    #expect(try Scratch.names(scratch("restored/tmp")).isEmpty)
    #expect(try Scratch.names(scratch.path) == ["backup", "restored", "sandbox"])
  }

  @Test("a sandbox whose recorded default class names no class is not backed up (65, saying how to repair it)")
  func unknownRecordedDefault() throws {
    let scratch = try Scratch()
    let sandbox = try scratch.sandbox()
    try Scratch.write(sandbox + "/Documents/a", Array("alpha".utf8))
    try Xattr.set(path: sandbox, name: "user.appbox.default-protection", value: Array("Complete".utf8))
    let writer = BackupWriter(backing: sandbox, bundleID: "com.example.engine", dryRun: false)
    #expect {
      try writer.run(destination: TargetDirectory.resolve(scratch("backup"), option: "--to"))
    } throws: { ($0 as? BackupError)?.kind == .badData && "\($0)".contains("names no protection class") }
    #expect(throws: Errno.noEntry, "no backup is left") { try Scratch.status(scratch("backup")) }
  }

  @Test("a device's backup with an XML Manifest.plist restores; an encrypted one does not")
  func manifests() throws {
    let scratch = try Scratch()
    let xml = try ForgedBackup(
      at: scratch("xml"), manifest: .dictionary([("IsEncrypted", .boolean(false)), ("Version", .string("10.0"))]),
      format: .xml)
    try xml.add("Documents/note", .file, bytes: Array("note".utf8), protection: 1)
    // A device's backup may hold excluded items (iOS skips them on restore): left out, with their subtrees.
    let legacy = (Array("com.apple.MobileBackup".utf8), [UInt8(1)])
    try xml.add("Documents/skip", .file, bytes: [1], attributes: [legacy])
    try xml.add("Documents/skipdir", .directory, attributes: [legacy])
    try xml.add("Documents/skipdir/inner", .file, bytes: nil, size: 9)
    try xml.finish()
    let summary = try ForgedBackup.restore(scratch("xml"), into: scratch("r1"))
    #expect(summary.files == 1 && summary.excluded == 2)
    #expect(try Scratch.names(scratch("r1/Documents")) == ["note"])
    let encrypted = try ForgedBackup(at: scratch("encrypted"), manifest: .dictionary([("IsEncrypted", .boolean(true))]))
    try encrypted.finish()
    #expect {
      try ForgedBackup.restore(scratch("encrypted"), into: scratch("r2"))
    } throws: { ($0 as? BackupError)?.kind == .badData && "\($0)".contains("encrypted") }
  }

  /// Ways to forge a backup that a restore must refuse (65), each with what the message names.
  static let hostile: [(name: String, message: String, forge: @Sendable (ForgedBackup, String) throws -> Void)] = [
    ("unknown class", "ProtectionClass 5", { b, _ in try b.add("Documents/f", .file, protection: 5) }),
    (
      "an attribute of 70,000 bytes", "70000 bytes",
      { b, _ in
        try b.add("Documents/f", .file, attributes: [(Array("user.big".utf8), [UInt8](repeating: 1, count: 70_000))])
      }
    ),
    (
      "a NUL in an attribute's name", "attribute named",
      { b, _ in
        try b.add("Documents/f", .file, attributes: [(Array("user.appbox.protection".utf8) + [0], Array("none".utf8))])
      }
    ),
    (
      "a file below a symlink", "lies below",
      { b, outside in
        try b.add("Documents/l", .symlink, target: outside)
        try b.add("Documents/l/f", .file, bytes: [1])
      }
    ),
    (
      "a path twice", "twice",
      { b, _ in
        try b.add("Documents/f", .file)
        try b.add("Documents/f", .file, fileID: String(repeating: "0", count: 40))
      }
    ),
    ("missing bytes", "missing", { b, _ in try b.add("Documents/f", .file, bytes: nil, size: 3) }),
    ("truncated bytes", "the manifest says 5", { b, _ in try b.add("Documents/f", .file, bytes: [1, 2], size: 5) }),
    (
      "bytes that are a FIFO", "not a regular file",
      { b, _ in
        try b.add("Documents/f", .file, bytes: nil)
        let path = b.contentPath("Documents/f")
        try Sys.mkdir(String(path.dropLast(41)), 0o700)
        guard mkfifo(path, 0o600) == 0 else { throw Errno.current }
      }
    ),
    (
      "bytes behind a symlinked bucket", "symlink",
      { b, outside in
        try b.add("Documents/f", .file, bytes: nil, size: 6)
        let path = b.contentPath("Documents/f")
        try Scratch.write(outside + "/" + path.suffix(40), Array("secret".utf8))
        guard symlink(outside, String(path.dropLast(41))) == 0 else { throw Errno.current }
      }
    ),
    ("a symlink without a target", "no Target", { b, _ in try b.add("Documents/l", .symlink) }),
  ]

  @Test("hostile backups are refused before anything is written, and nothing is left", arguments: hostile.indices)
  func hostileBackup(_ index: Int) throws {
    let (name, message, forge) = Self.hostile[index]
    let scratch = try Scratch()
    try Sys.mkdir(scratch("outside"), 0o755)
    let backup = try ForgedBackup(at: scratch("backup"))
    try forge(backup, scratch("outside"))
    try backup.finish()
    try Sys.mkdir(scratch("work"), 0o755)
    var thrown: BackupError?
    do {
      _ = try ForgedBackup.restore(scratch("backup"), into: scratch("work/restored"))
    } catch {
      thrown = error as? BackupError
    }
    #expect(
      thrown?.kind == .badData && thrown?.message.contains(message) == true, "\(name): \(String(describing: thrown))")
    #expect(try Scratch.names(scratch("work")).isEmpty, "\(name)")
    #expect(try Scratch.names(scratch("outside")).allSatisfy { $0.count == 40 }, "\(name): nothing written outside")
  }

  @Test("a restore larger than the capacity given is refused before anything is written; one that fits is not")
  func capacity() throws {
    let scratch = try Scratch()
    let backup = try ForgedBackup(at: scratch("backup"))
    try backup.add("Documents/big", .file, bytes: pattern(3 << 20, seed: 7))
    try backup.finish()
    #expect {
      try ForgedBackup.restore(scratch("backup"), into: scratch("small"), capacity: 2 << 20)
    } throws: { ($0 as? BackupError)?.kind == .badData && "\($0)".contains("capacity") }
    #expect(try Scratch.names(scratch.path) == ["backup"])
    #expect(try ForgedBackup.restore(scratch("backup"), into: scratch("roomy"), capacity: 4 << 20).bytes == 3 << 20)
  }

  @Test("a target that is not empty, and a backup that is not one, are refused")
  func refusals() throws {
    let scratch = try Scratch()
    let backup = try ForgedBackup(at: scratch("backup"))
    try backup.finish()
    try Sys.mkdir(scratch("full"), 0o755)
    try Scratch.write(scratch("full/x"), [1])
    #expect {
      try ForgedBackup.restore(scratch("backup"), into: scratch("full"))
    } throws: { ($0 as? BackupError)?.kind == .unusablePath && "\($0)".contains("not empty") }
    #expect {
      try BackupRestorer(backup: scratch("full")).open()
    } throws: { ($0 as? BackupError)?.kind == .badData && "\($0)".contains("no Manifest.plist") }
    #expect {
      try BackupRestorer(backup: scratch("missing")).open()
    } throws: { ($0 as? BackupError)?.kind == .unusablePath }
  }
}
