import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxBackup

#if canImport(Glibc)
  import Glibc
#endif

/// A user who owns the directory where root backs up or restores swaps a directory for a
/// symlink, or fills a file's holes, at the moment that would hurt most (``EngineHooks``
/// makes the moment exact): nothing of root's lands anywhere but where it was resolved,
/// and nothing counts for more than the first pass counted.
@Suite("Backups and restores raced by the owner of the target's parent")
struct BackupRaceTests {
  /// A sandbox with a file, and the places of the race: `user` (the parent the user owns),
  /// `rootonly` (where the user wants root's writes to go).
  static func scene(_ scratch: Scratch) throws -> String {
    let sandbox = try scratch.sandbox()
    try Scratch.write(sandbox + "/Documents/a", Array("alpha".utf8))
    try Scratch.write(sandbox + "/Library/Preferences/p", Array("prefs".utf8))
    try Sys.mkdir(scratch("user"), 0o755)
    try Sys.mkdir(scratch("rootonly"), 0o700)
    return sandbox
  }

  /// Moves `user` away and puts a symlink to `to` in its place.
  static func swapParent(_ scratch: Scratch, to: String) throws {
    try Sys.rename(scratch("user"), to: scratch("user.moved"))
    guard symlink(to, scratch("user")) == 0 else { throw Errno.current }
  }

  @Test(
    "backup: the destination's parent swapped for a symlink after it was resolved; the backup goes where it was resolved"
  )
  func backupParentSwapped() throws {
    let scratch = try Scratch()
    let sandbox = try Self.scene(scratch)
    let target = try TargetDirectory.resolve(scratch("user/backup"), option: "--to")
    try Self.swapParent(scratch, to: scratch("rootonly"))
    let writer = BackupWriter(backing: sandbox, bundleID: "com.example.race", dryRun: false)
    _ = try writer.run(destination: target)
    #expect(try Scratch.names(scratch("rootonly")).isEmpty, "the backup followed the swapped parent")
    #expect(try Scratch.names(scratch("user.moved")) == ["backup"])
    #expect(try Manifests.rowCount(scratch("user.moved/backup/Manifest.db")) == 6)
  }

  @Test(
    "restore: the target's parent swapped for a symlink during the check pass; the restore goes where it was resolved")
  func restoreParentSwapped() throws {
    let scratch = try Scratch()
    _ = try Self.scene(scratch)
    let backup = try ForgedBackup(at: scratch("backup"))
    try backup.add("Documents/f", .file, bytes: Array("data".utf8))
    try backup.finish()
    let restorer = BackupRestorer(backup: scratch("backup"))
    let (database, domains) = try restorer.open()
    let target = try TargetDirectory.resolve(scratch("user/restored"), option: "--backing")
    restorer.hooks.checked = { try? Self.swapParent(scratch, to: scratch("rootonly")) }  // checked below
    _ = try restorer.restore(database, domain: domains[0], into: target, capacity: nil)
    #expect(try Scratch.status(scratch("user")).st_mode & S_IFMT == S_IFLNK, "the swap happened")
    #expect(try Scratch.names(scratch("rootonly")).isEmpty, "the restore followed the swapped parent")
    #expect(try Scratch.read(scratch("user.moved/restored/Documents/f")) == Array("data".utf8))
  }

  @Test("backup: the staging directory's parent swapped once it is made; Manifest.db is written in it, nowhere else")
  func manifestThroughSwappedParent() throws {
    let scratch = try Scratch()
    let sandbox = try Self.scene(scratch)
    let target = try TargetDirectory.resolve(scratch("user/backup"), option: "--to")
    let writer = BackupWriter(backing: sandbox, bundleID: "com.example.race", dryRun: false)
    var swapped = false
    writer.hooks.stagingMade = { staging in
      // The user's copy of the staging directory's name, whose Manifest.db leads to a
      // file of root's choosing.
      let name = String(staging.split(separator: "/").last ?? "")
      do {
        try Sys.mkdir(scratch("evil"), 0o755)
        try Sys.mkdir(scratch("evil/" + name), 0o755)
        guard symlink(scratch("rootonly/pwned.db"), scratch("evil/" + name + "/Manifest.db")) == 0 else {
          throw Errno.current
        }
        try Self.swapParent(scratch, to: scratch("evil"))
        swapped = true
      } catch {
        Issue.record("the swap failed: \(error)")
      }
    }
    _ = try writer.run(destination: target)
    #expect(swapped)
    #expect(try Scratch.names(scratch("rootonly")).isEmpty, "SQLite wrote through the swapped parent")
    #expect(try Scratch.names(scratch("user.moved")) == ["backup"])
    #expect(try Manifests.rowCount(scratch("user.moved/backup/Manifest.db")) == 6)
  }

  @Test("backup: a Manifest.db that lost its rows before the backup is checked fails the backup, and nothing is left")
  func manifestCheckedBeforeSuccess() throws {
    let scratch = try Scratch()
    let sandbox = try Self.scene(scratch)
    let writer = BackupWriter(backing: sandbox, bundleID: "com.example.race", dryRun: false)
    writer.hooks.databaseWritten = { staging in
      do { try Sys.ftruncate(Sys.open(staging + "/Manifest.db", O_WRONLY), 0) } catch {
        Issue.record("cannot truncate: \(error)")
      }
    }
    #expect {
      try writer.run(destination: TargetDirectory.resolve(scratch("user/backup"), option: "--to"))
    } throws: { ($0 as? BackupError)?.kind == .system && "\($0)".contains("Manifest.db") }
    #expect(try Scratch.names(scratch("user")).isEmpty)
  }

  @Test(
    "restore: a sparse file filled after the check pass is refused (65) before it can fill the target's filesystem",
    .enabled(if: geteuid() == 0, "mounts a tmpfs"))
  func sparseFileFilledAfterCheck() throws {
    let scratch = try Scratch()
    let backup = try ForgedBackup(at: scratch("backup"))
    let size = 24 << 20
    try backup.add("Documents/sparse", .file, bytes: [], size: Int64(size))
    try backup.finish()
    // 4 KiB of data, the rest a hole.
    let content = try Sys.open(backup.contentPath("Documents/sparse"), O_WRONLY)
    defer { Sys.close(content) }
    _ = try pattern(4096, seed: 3).withUnsafeBytes { (b) throws(Errno) in try Sys.pwrite(content, b, 0) }
    try Sys.ftruncate(content, off_t(size))
    // The target: a filesystem of 8 MiB, which the file fits as counted, not filled.
    try Sys.mkdir(scratch("small"), 0o755)
    guard mount("appbox-test", scratch("small"), "tmpfs", 0, "size=8m,mode=0755") == 0 else { throw Errno.current }
    defer { umount2(scratch("small"), Int32(MNT_DETACH)) }
    let restorer = BackupRestorer(backup: scratch("backup"))
    let (database, domains) = try restorer.open()
    restorer.hooks.checked = {
      let chunk = pattern(1 << 20, seed: 4)
      for offset in stride(from: 4096, to: size, by: 1 << 20) {
        let part = chunk.prefix(size - offset)
        _ = try? part.withUnsafeBytes { (b) throws(Errno) in try Sys.pwrite(content, b, off_t(offset)) }
      }
    }
    let target = try TargetDirectory.resolve(scratch("small/restored"), option: "--backing")
    #expect {
      try restorer.restore(database, domain: domains[0], into: target, capacity: nil)
    } throws: { ($0 as? BackupError)?.kind == .badData && "\($0)".contains("changed") }
    #expect(try Scratch.names(scratch("small")).isEmpty)
  }
}
