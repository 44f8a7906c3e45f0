import Testing

@testable import SandboxPolicy

@Suite("Backup format: SHA-1, binary plists, MBFile records")
struct BackupFormatTests {
  static let digests: [(String, String)] = [
    ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
    ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
    (
      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
      "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
    ),
    (String(repeating: "a", count: 1000), "291e9a6c66994949b57ba5e650361e98fc36b1ba"),
  ]

  @Test(arguments: digests)
  func sha1(_ input: String, _ hex: String) {
    #expect(SHA1.hexDigest(Array(input.utf8)) == hex)
  }

  @Test func fileIDIsSHA1OfDomainDashPath() {
    // The id iOS gives an app's Documents directory entry.
    #expect(
      BackupRules.fileID(domain: "AppDomain-com.example.app", relativePath: Array("Documents/a".utf8))
        == SHA1.hexDigest(Array("AppDomain-com.example.app-Documents/a".utf8)))
    #expect(BackupRules.contentPath(fileID: "abcdef") == "ab/abcdef")
  }

  static let plists: [PropertyList] = [
    .string("ascii"), .string("ünïcödé ✓"), .integer(0), .integer(255), .integer(256), .integer(70_000),
    .integer(5_000_000_000), .integer(-1), .real(1.5), .boolean(true), .boolean(false), .date(123.25),
    .data([]), .data(Array(0...255)), .uid(0), .uid(300),
    .array((0..<40).map { .integer(Int64($0)) }),
    .dictionary([
      ("b", .string("x")), ("a", .array([.uid(1), .data([1, 2])])), ("$top", .dictionary([("root", .uid(1))])),
    ]),
    .string(String(repeating: "long", count: 100)),
  ]

  @Test(arguments: plists)
  func plistRoundTrip(_ value: PropertyList) throws {
    #expect(try BinaryPropertyList.decode(BinaryPropertyList.encode(value)) == value)
  }

  @Test func manyObjectsNeedWiderReferences() throws {
    let value = PropertyList.array((0..<70_000).map { .integer(Int64($0)) })
    #expect(try BinaryPropertyList.decode(BinaryPropertyList.encode(value)) == value)
  }

  @Test func badInputIsAnErrorNeverATrap() {
    let good = BinaryPropertyList.encode(.dictionary([("a", .array([.string("x"), .data([1, 2, 3])]))]))
    #expect(throws: BinaryPropertyList.ReadError.notBinaryPlist) { try BinaryPropertyList.decode(Array("<?xml".utf8)) }
    // Every truncation and every single-byte corruption either decodes or throws.
    for length in 0..<good.count {
      _ = try? BinaryPropertyList.decode(Array(good.prefix(length)))
    }
    for index in good.indices {
      for byte: UInt8 in [0x00, 0x0F, 0x7F, 0xFF] {
        var bad = good
        bad[index] = byte
        _ = try? BinaryPropertyList.decode(bad)
      }
    }
    // A reference cycle: an array holding itself.
    var cycle = BinaryPropertyList.encode(.array([.integer(1)]))
    cycle[9] = 0  // the array's one reference now points at the array
    #expect(throws: BinaryPropertyList.ReadError.tooComplex) { try BinaryPropertyList.decode(cycle) }
  }

  static let record = BackupFileRecord(
    relativePath: Array("Documents/a b.txt".utf8), kind: .file, mode: 0o100644, userID: 501, groupID: 20, size: 12,
    inode: 42, birth: 1_700_000_000, lastModified: 1_700_000_001, lastStatusChange: 1_700_000_002,
    protectionClass: 1, extendedAttributes: [(Array("user.tag".utf8), [1, 2]), (Array("com.apple.x".utf8), [])])

  @Test func recordArchiveIsAnNSKeyedArchiverMBFile() throws {
    let archive = try BinaryPropertyList.decode(Self.record.archive())
    #expect(archive["$archiver"] == .string("NSKeyedArchiver"))
    #expect(archive["$top"]?["root"] == .uid(1))
    let objects = try #require(archive["$objects"]?.arrayValue)
    #expect(objects[0] == .string("$null"))
    let file = objects[1]
    #expect(file["Mode"] == .integer(0o100644))
    #expect(file["ProtectionClass"] == .integer(1))
    #expect(file["Size"] == .integer(12))
    let path = try #require(file["RelativePath"]?.uidValue)
    #expect(objects[Int(path)] == .string("Documents/a b.txt"))
    let classRef = try #require(file["$class"]?.uidValue)
    #expect(objects[Int(classRef)]["$classname"] == .string("MBFile"))
    let attributes = try #require(file["ExtendedAttributes"]?.uidValue)
    let data = try #require(objects[Int(attributes)]["NS.data"]?.dataValue)
    #expect(try BinaryPropertyList.decode(data)["user.tag"] == .data([1, 2]))
  }

  @Test func recordRoundTrips() throws {
    var symlink = Self.record
    symlink.kind = .symlink
    symlink.mode = 0o120777
    symlink.target = Array("../x".utf8)
    symlink.extendedAttributes = []
    for record in [Self.record, symlink] {
      let back = try BackupFileRecord.unarchive(
        record.archive(), relativePath: record.relativePath, flags: record.kind.rawValue)
      #expect(back == record)
    }
    #expect(throws: BackupFileRecord.ReadError.self) {
      try BackupFileRecord.unarchive([1, 2, 3], relativePath: [], flags: 1)
    }
    #expect(throws: BackupFileRecord.ReadError.self) {
      try BackupFileRecord.unarchive(BinaryPropertyList.encode(.string("x")), relativePath: [], flags: 1)
    }
  }
}

@Suite("What a device backup holds")
struct BackupRulesTests {
  static func components(_ path: String) -> [[UInt8]] { path.split(separator: "/").map { Array($0.utf8) } }

  static let scopes: [(String, BackupRules.Scope)] = [
    ("Documents", .backedUp), ("Documents/a/b", .backedUp), ("Library", .backedUp),
    ("Library/Application Support/db", .backedUp), ("Library/Preferences/p.plist", .backedUp),
    ("Library/Other/x", .backedUp), ("Library/Caches", .caches), ("Library/Caches/x", .caches),
    ("Library/CachesNot/x", .backedUp), ("tmp", .tmp), ("tmp/x", .tmp), ("Other", .outside), ("", .outside),
  ]

  @Test(arguments: scopes)
  func scope(_ path: String, _ expected: BackupRules.Scope) {
    #expect(BackupRules.scope(of: Self.components(path)) == expected)
  }

  @Test func exclusionByEitherAttribute() {
    let modern = BackupRules.modernExclusionName
    let legacy = BackupRules.legacyExclusionName
    #expect(BackupRules.exclusion([(modern, Array("anything".utf8))]) == .modern)
    #expect(BackupRules.exclusion([(modern, [])]) == .modern)
    #expect(BackupRules.exclusion([(legacy, [1])]) == .legacy)
    #expect(BackupRules.exclusion([(legacy, [0])]) == nil)
    #expect(BackupRules.exclusion([(Array("user.appbox.x.com.apple.MobileBackup".utf8), [1])]) == nil)
    #expect(BackupRules.exclusion([]) == nil)
  }

  static let restorable: [(String, Bool)] = [
    ("Documents/a", true), ("Library/Preferences/p", true), ("Documents", true), ("Library/Caches/x", false),
    ("tmp/x", false), ("SystemData/x", false), ("Documents/../../etc", false), ("/Documents/a", false),
    ("Documents//a", false), ("Documents/./a", false), ("", false),
  ]

  @Test(arguments: restorable)
  func restorablePaths(_ path: String, _ expected: Bool) {
    #expect((BackupRules.restorableComponents(Array(path.utf8)) != nil) == expected)
  }

  @Test func bundleIDs() {
    #expect(BackupRules.isValidBundleID("com.example.App-1_x"))
    #expect(!BackupRules.isValidBundleID(""))
    #expect(!BackupRules.isValidBundleID("a/b"))
    #expect(BackupRules.bundleID(ofDomain: "AppDomain-com.x") == "com.x")
    #expect(BackupRules.bundleID(ofDomain: "AppDomainGroup-group.x") == nil)
  }

  @Test func reportTalliesAndKeepsTheLargest() {
    var report = BackupReport()
    for size in 1...20 {
      report.addIncluded(Self.components("Documents/f\(size)"), kind: .file, bytes: Int64(size * 100))
    }
    report.addIncluded(Self.components("Library/Preferences/p"), kind: .file, bytes: 7)
    report.addIncluded(Self.components("Documents/d"), kind: .directory, bytes: 0)
    report.addExcluded(Self.components("Documents/big"), by: .modern, files: 3, bytes: 5000)
    report.addNotBackedUp(.caches, files: 2, bytes: 10)
    #expect(report.included == .init(files: 21, bytes: 21_007))
    #expect(report.byDirectory[0].tally == .init(files: 20, bytes: 21_000))
    #expect(report.byDirectory[2].tally == .init(files: 1, bytes: 7))
    #expect(report.largest.count == BackupReport.largestCount)
    #expect(report.largest.first?.bytes == 2000)
    #expect(report.largest.last?.bytes == 1100)
    #expect(report.excluded == .init(files: 3, bytes: 5000))
    #expect(
      report.json(dryRun: true).contains(
        "\"excluded\":{\"files\":3,\"bytes\":5000,\"items\":[{\"path\":\"Documents/big\",\"bytes\":5000,\"by\":\"modern\"}]}"
      ))
    #expect(report.text(dryRun: true).hasPrefix("largest backed-up files:"))
  }
}
