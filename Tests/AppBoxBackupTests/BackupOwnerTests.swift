import Posix
import SandboxPolicy
import Testing

@testable import AppBoxBackup

#if canImport(Glibc)
  import Glibc
#endif

/// Root backing up another user's sandbox reads it with that user's rights, from a backing
/// directory of theirs reached without symlinks: whatever their daemon names, and whatever
/// they put in it, root's backup holds nothing they could not read themselves.
@Suite(
  "Backups of another user's sandbox: read with the owner's rights",
  .enabled(if: geteuid() == 0, "switches to uid 65534"))
struct BackupOwnerTests {
  static let owner = UserCredentials(uid: 65534, gid: 65534, groups: [65534])

  /// A sandbox of uid 65534 with a file of theirs (0600), in a directory root owns.
  static func ownersSandbox(_ scratch: Scratch) throws -> String {
    try Sys.chmod(scratch.path, 0o755)
    let sandbox = try scratch.sandbox()
    try Scratch.write(sandbox + "/Documents/mine", Array("the owner's".utf8), mode: 0o600)
    try giveAway(sandbox)
    return sandbox
  }

  /// Makes everything under `root` uid 65534's.
  static func giveAway(_ root: String) throws {
    var pending = [root]
    while let path = pending.popLast() {
      guard lchown(path, 65534, 65534) == 0 else { throw Errno.current }
      if try Scratch.status(path).st_mode & S_IFMT == S_IFDIR {
        pending += try Scratch.names(path).map { path + "/" + $0 }
      }
    }
  }

  static func backUp(_ backing: String, to target: String) throws -> BackupReport {
    try BackupWriter(backing: backing, owner: Self.owner, bundleID: "com.example.owner", dryRun: false)
      .run(destination: TargetDirectory.resolve(target, option: "--to"))
  }

  @Test("the owner's files are backed up, a 0600 one included, by root reading as the owner")
  func ownersFiles() throws {
    let scratch = try Scratch()
    let sandbox = try Self.ownersSandbox(scratch)
    let report = try Self.backUp(sandbox, to: scratch("backup"))
    #expect(report.included.files == 1)
    #expect(try Manifests.rowCount(scratch("backup/Manifest.db")) == 5)
    #expect(try Scratch.status(scratch("backup")).st_uid == 0, "the backup is root's")
  }

  @Test("a root-only file in the owner's sandbox (a hard link, say) fails the backup: nothing is copied, nothing left")
  func rootOnlyFileInside() throws {
    let scratch = try Scratch()
    let sandbox = try Self.ownersSandbox(scratch)
    try Scratch.write(sandbox + "/Documents/planted", Array("root's secret".utf8), mode: 0o600)
    try Sys.mkdir(scratch("out"), 0o755)
    #expect {
      try Self.backUp(sandbox, to: scratch("out/backup"))
    } throws: { error in
      let error = error as? BackupError
      return error?.kind == .system && error?.message.contains("Documents/planted") == true
        && error?.message.contains("ermission denied") == true
    }
    #expect(try Scratch.names(scratch("out")).isEmpty)
  }

  @Test(
    "a backing directory that is a symlink, lies behind one, is not the owner's, or is not absolute is refused (77)",
    arguments: ["symlink", "behind", "root's", "root-only", "relative", "dotdot"])
  func untrustedBacking(_ how: String) throws {
    let scratch = try Scratch()
    let sandbox = try Self.ownersSandbox(scratch)
    // Root's sandbox, which a daemon of the owner's would like root to back up.
    try Sys.mkdir(scratch("rootonly"), how == "root-only" ? 0o700 : 0o755)
    for directory in ["Documents", "Library"] { try Sys.mkdir(scratch("rootonly/" + directory), 0o755) }
    try Scratch.write(scratch("rootonly/Documents/secret"), Array("root's secret".utf8), mode: 0o644)
    let backing: String
    switch how {
    case "symlink":
      guard symlink(scratch("rootonly"), scratch("link")) == 0 else { throw Errno.current }
      backing = scratch("link")
    case "behind":
      guard symlink(scratch.path, scratch("up")) == 0 else { throw Errno.current }
      backing = scratch("up/sandbox")
    case "root's", "root-only": backing = scratch("rootonly")
    case "relative": backing = "sandbox"
    default: backing = sandbox + "/../rootonly"
    }
    try Sys.mkdir(scratch("out"), 0o755)
    #expect {
      try Self.backUp(backing, to: scratch("out/backup"))
    } throws: { ($0 as? BackupError)?.kind == .notPermitted }
    #expect(try Scratch.names(scratch("out")).isEmpty)
  }

  @Test("the credentials of a user come from the group database; a uid without a passwd entry gets its gid alone")
  func credentials() {
    let root = UserCredentials.of(uid: 0, gid: 0)
    #expect(root.groups.contains(0))
    let unknown = UserCredentials.of(uid: 4_000_123, gid: 4_000_123)
    #expect(unknown.groups == [4_000_123])
  }

  @Test(
    "root restores another user's backup with that user's rights: their files restore, a root-only file among them is refused"
  )
  func restoreAsBackupOwner() throws {
    let scratch = try Scratch()
    try Sys.chmod(scratch.path, 0o755)
    let backup = try ForgedBackup(at: scratch("backup"))
    try backup.add("Documents/theirs", .file, bytes: Array("theirs".utf8))
    try backup.add("Documents/planted", .file, bytes: Array("ROOT-ONLY".utf8))
    try backup.finish()
    try Self.giveAway(scratch("backup"))
    // The bytes of one file replaced by a root-only file (what a hard link to one would be).
    let planted = backup.contentPath("Documents/planted")
    try Sys.unlink(planted)
    try Scratch.write(planted, Array("ROOT-ONLY".utf8), mode: 0o600)
    try Sys.mkdir(scratch("out"), 0o755)
    #expect {
      try ForgedBackup.restore(scratch("backup"), into: scratch("out/restored"))
    } throws: { error in
      let error = error as? BackupError
      return error?.kind == .badData && error?.message.contains("Documents/planted") == true
        && error?.message.contains("ermission denied") == true
    }
    #expect(try Scratch.names(scratch("out")).isEmpty)
    // With those bytes the owner's, the backup restores (as root's files).
    try Sys.unlink(planted)
    try Scratch.write(planted, Array("ROOT-ONLY".utf8), mode: 0o600)
    try Self.giveAway(planted)
    let summary = try ForgedBackup.restore(scratch("backup"), into: scratch("out/restored"))
    #expect(summary.files == 2)
    #expect(try Scratch.status(scratch("out/restored/Documents/theirs")).st_uid == 0)
  }
}
