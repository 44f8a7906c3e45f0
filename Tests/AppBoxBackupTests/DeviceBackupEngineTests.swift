import AppBoxFS
import Foundation
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxBackup

#if canImport(Glibc)
  import Glibc
#endif

/// A device's backup and restore below the command line: the hardening of a plain
/// sandbox's holds for every container (docs/reference.md#a-device): another user's device
/// read with their rights, containers reached without symlinks, `Manifest.db` read back
/// domain by domain, one space estimate over every container.
@Suite("The backup engine on a device's backing directory")
struct DeviceBackupEngineTests {
  static let (a, b, shared) = ("com.example.a", "com.example.b", "group.com.example.shared")

  /// A device's backing directory, not mounted: apps `a` and `b`, both members of
  /// `shared`, each container with its layout, metadata and a file of its own (0600).
  static func device(_ scratch: Scratch) throws -> String {
    let root = scratch("device")
    try Sys.mkdir(root, 0o755)
    for directory in DeviceLayout.creationOrder {
      try Sys.mkdir(root + "/" + text(directory.components), 0o755)
    }
    let group = try ContainerIdentifier(validating: shared)
    for (kind, name) in [(ContainerKind.app, a), (.app, b), (.group, shared)] {
      let id = try ContainerIdentifier(validating: name)
      let container = root + "/" + text(DeviceLayout.components(of: kind, id))
      try Sys.mkdir(container, 0o755)
      for fixed in kind.fixedDirectories { try Sys.mkdir(container + "/" + fixed.path, 0o755) }
      let metadata = ContainerMetadata(
        identifier: id, kind: kind, groups: kind == .app ? [group] : [], uuid: BackupPlists.randomUUID())
      try Scratch.write(container + "/" + text([DeviceLayout.metadataFileName]), metadata.encoded)
      let own = kind == .app ? "/Documents/mine" : "/shared.json"
      try Scratch.write(container + own, pattern(5000, seed: UInt64(name.utf8.count)), mode: 0o600)
    }
    return root
  }

  static func text(_ components: [[UInt8]]) -> String {
    components.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
  }

  static func container(_ root: String, _ kind: ContainerKind, _ name: String) throws -> String {
    root + "/" + text(DeviceLayout.components(of: kind, try ContainerIdentifier(validating: name)))
  }

  static func backUp(_ device: String, to target: String, owner: UserCredentials? = nil) throws -> BackupReport {
    try BackupWriter(device: device, owner: owner, dryRun: false)
      .run(destination: TargetDirectory.resolve(target, option: "--to"))
  }

  /// The rows of each domain of the backup's `Manifest.db`.
  static func rows(_ backup: String) throws -> [String: Int64] {
    try Manifests.open(backup + "/Manifest.db").rowCounts()
  }

  @Test("every container is backed up in its own domain, and Manifest.db is read back with each domain's rows")
  func domains() throws {
    let scratch = try Scratch()
    let device = try Self.device(scratch)
    let report = try Self.backUp(device, to: scratch("backup"))
    #expect(report.included.files == 3)
    // An app: Documents, Library, its two, the file; the group: Library, Preferences, the file.
    #expect(
      try Self.rows(scratch("backup")) == [
        "AppDomain-\(Self.a)": 5, "AppDomain-\(Self.b)": 5, "AppDomainGroup-\(Self.shared)": 3,
      ])
  }

  @Test("a Manifest.db whose rows moved between domains (the total unchanged) fails the backup, and nothing is left")
  func readBackByDomain() throws {
    let scratch = try Scratch()
    let device = try Self.device(scratch)
    let writer = BackupWriter(device: device, dryRun: false)
    writer.hooks.databaseWritten = { staging in
      let sql =
        "UPDATE Files SET domain = 'AppDomain-\(Self.a)' WHERE rowid = (SELECT min(rowid) FROM Files WHERE domain = 'AppDomainGroup-\(Self.shared)')"
      let script = "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(sys.argv[2]); db.commit()"
      let python = Process()
      python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
      python.arguments = ["python3", "-c", script, staging + "/Manifest.db", sql]
      do {
        try python.run()
        python.waitUntilExit()
      } catch {
        Issue.record("cannot run python3: \(error)")
      }
      #expect(python.terminationStatus == 0, "python3 changed the database")
    }
    try Sys.mkdir(scratch("out"), 0o755)
    #expect {
      try writer.run(destination: TargetDirectory.resolve(scratch("out/backup"), option: "--to"))
    } throws: { ($0 as? BackupError)?.kind == .system && "\($0)".contains("AppDomainGroup-\(Self.shared): 2 of 3") }
    #expect(try Scratch.names(scratch("out")).isEmpty)
  }

  @Test("a container that is a symlink (to a sandbox elsewhere) is refused, and nothing is left")
  func containerSymlink() throws {
    let scratch = try Scratch()
    let device = try Self.device(scratch)
    let elsewhere = try scratch.sandbox("elsewhere")
    try Scratch.write(elsewhere + "/Documents/secret", Array("not the device's".utf8))
    let b = try Self.container(device, .app, Self.b)
    try Sys.rename(b, to: scratch("moved"))
    guard symlink(elsewhere, b) == 0 else { throw Errno.current }
    try Sys.mkdir(scratch("out"), 0o755)
    #expect {
      try Self.backUp(device, to: scratch("out/backup"))
    } throws: { ($0 as? BackupError)?.kind == .badData && "\($0)".contains(Self.b) }
    #expect(try Scratch.names(scratch("out")).isEmpty)
  }

  @Test(
    "root backs up another user's device with their rights: their files in every container; a root-only file in the group fails it",
    .enabled(if: geteuid() == 0, "switches to uid 65534"))
  func ownersDevice() throws {
    let scratch = try Scratch()
    try Sys.chmod(scratch.path, 0o755)
    let device = try Self.device(scratch)
    try BackupOwnerTests.giveAway(device)
    let report = try Self.backUp(device, to: scratch("backup"), owner: BackupOwnerTests.owner)
    #expect(report.included.files == 3)
    #expect(try Scratch.status(scratch("backup")).st_uid == 0, "the backup is root's")
    let group = try Self.container(device, .group, Self.shared)
    try Scratch.write(group + "/Library/Preferences/planted", Array("root's secret".utf8), mode: 0o600)
    try Sys.mkdir(scratch("out"), 0o755)
    #expect {
      try Self.backUp(device, to: scratch("out/backup"), owner: BackupOwnerTests.owner)
    } throws: { error in
      let error = error as? BackupError
      return error?.kind == .system && error?.message.contains("Library/Preferences/planted") == true
        && error?.message.contains("ermission denied") == true
    }
    #expect(try Scratch.names(scratch("out")).isEmpty)
  }

  static func restoreDevice(_ backup: String, into target: String, capacity: Int64? = nil) throws
    -> BackupRestorer.Summary
  {
    let restorer = BackupRestorer(backup: backup)
    let (database, _) = try restorer.open()
    let group = try ContainerIdentifier(validating: shared)
    let containers =
      try [a, b].map {
        BackupRestorer.DeviceContainer(
          kind: .app, id: try ContainerIdentifier(validating: $0), domain: BackupRules.domain(bundleID: $0),
          groups: [group])
      } + [.init(kind: .group, id: group, domain: BackupRules.groupDomain(groupID: shared))]
    return try restorer.restoreDevice(
      database, containers: containers, into: TargetDirectory.resolve(target, option: "--backing"),
      capacity: capacity)
  }

  @Test(
    "a device restore's one estimate covers every container: at least what du counts, and a capacity a byte short refuses it whole",
    .enabled(if: RestoreSpaceTests.scratchIsExt4, "the estimate models ext4, and /tmp is another filesystem"))
  func oneEstimate() throws {
    let scratch = try Scratch()
    let device = try Self.device(scratch)
    // The same small directories in both apps (a block each, in each container), files
    // with attributes beyond the inode in the group.
    let attribute = (name: "user.note", value: pattern(2000, seed: 7))
    for (kind, name) in [(ContainerKind.app, Self.a), (.app, Self.b), (.group, Self.shared)] {
      let container = try Self.container(device, kind, name)
      for index in 0..<300 {
        let directory = container + (kind == .app ? "/Documents/d\(index)" : "/d\(index)")
        try Sys.mkdir(directory, 0o755)
        try Scratch.write(directory + "/f", [UInt8(index & 0xFF)])
        if kind == .group { try Xattr.set(path: directory + "/f", name: attribute.name, value: attribute.value) }
      }
    }
    _ = try Self.backUp(device, to: scratch("backup"))
    try Sys.mkdir(scratch("out"), 0o755)
    let summary = try Self.restoreDevice(scratch("backup"), into: scratch("out/restored"))
    let counted = try RestoreSpaceTests.du(scratch("out/restored"))
    #expect(summary.spaceNeeded >= counted, "estimated \(summary.spaceNeeded), du \(counted)")
    #expect(summary.spaceNeeded <= counted * 2 + (64 << 10), "estimated \(summary.spaceNeeded), du \(counted)")
    #expect(summary.files == 3 + 900)
    #expect {
      try Self.restoreDevice(scratch("backup"), into: scratch("out/again"), capacity: summary.spaceNeeded - 1)
    } throws: { ($0 as? BackupError)?.kind == .badData && "\($0)".contains("capacity") }
    #expect(try Scratch.names(scratch("out")) == ["restored"])
    _ = try Self.restoreDevice(scratch("backup"), into: scratch("out/again"), capacity: summary.spaceNeeded)
  }

  @Test("containers that would not make a device (a crafted Manifest.plist's) are refused before anything is written")
  func inconsistentContainers() throws {
    let scratch = try Scratch()
    _ = try Self.backUp(try Self.device(scratch), to: scratch("backup"))
    try Sys.mkdir(scratch("out"), 0o755)
    let restorer = BackupRestorer(backup: scratch("backup"))
    let (database, _) = try restorer.open()
    let (a, b, shared) = try (
      ContainerIdentifier(validating: Self.a), ContainerIdentifier(validating: Self.b),
      ContainerIdentifier(validating: Self.shared)
    )
    func app(_ id: ContainerIdentifier, _ groups: [ContainerIdentifier] = []) -> BackupRestorer.DeviceContainer {
      .init(kind: .app, id: id, domain: BackupRules.domain(bundleID: id.name), groups: groups)
    }
    func group(_ id: ContainerIdentifier) -> BackupRestorer.DeviceContainer {
      .init(kind: .group, id: id, domain: BackupRules.groupDomain(groupID: id.name))
    }
    for (what, containers) in [
      ("an app naming another app as its group", [app(a, [b]), app(b)]),
      ("an app naming itself as its group", [app(a, [a])]),
      ("an app twice", [app(a), app(a)]),
      ("a group that is also an app", [app(a, [shared]), app(b), group(b)]),
      ("a group no restored app names", [app(a), group(shared)]),
      ("a group twice", [app(a, [shared]), group(shared), group(shared)]),
    ] {
      #expect(throws: BackupError.self, "\(what)") {
        try restorer.restoreDevice(
          database, containers: containers, into: TargetDirectory.resolve(scratch("out/device"), option: "--backing"),
          capacity: nil)
      }
      #expect(try Scratch.names(scratch("out")).isEmpty, "\(what): nothing written")
    }
  }
}
