import PropertyLists
import SandboxPolicy
import Testing

@testable import AppBoxBackup

@Suite("Backup format: SHA-1, file ids, MBFile records, the plists")
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
      BackupLayout.fileID(domain: "AppDomain-com.example.app", relativePath: Array("Documents/a".utf8))
        == SHA1.hexDigest(Array("AppDomain-com.example.app-Documents/a".utf8)))
    #expect(BackupLayout.contentPath(fileID: "abcdef") == "ab/abcdef")
  }

  static let record = BackupFileRecord(
    relativePath: Array("Documents/a b.txt".utf8), kind: .file, mode: 0o100644, userID: 501, groupID: 20, size: 12,
    inode: 42, birth: 1_700_000_000, lastModified: 1_700_000_001, lastStatusChange: 1_700_000_002,
    protectionClass: 1, extendedAttributes: [(Array("user.tag".utf8), [1, 2]), (Array("com.apple.x".utf8), [])])

  @Test func recordArchiveIsAnNSKeyedArchiverMBFile() throws {
    let archive = try PropertyList(decoding: Self.record.archive())
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
    #expect(try PropertyList(decoding: data)["user.tag"] == .data([1, 2]))
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
      try BackupFileRecord.unarchive(PropertyList.string("x").encoded(as: .binary), relativePath: [], flags: 1)
    }
  }

  @Test("a record whose archive is broken is an error: no $objects, a bad attribute table, a Target that is no string")
  func brokenRecords() {
    func archive(_ record: [(String, PropertyList)], extra: [PropertyList] = []) -> [UInt8] {
      PropertyList.dictionary([
        ("$archiver", .string("NSKeyedArchiver")),
        ("$objects", .array([.string("$null"), .dictionary(record), .string("p")] + extra)),
      ]).encoded(as: .binary)
    }
    let mode: (String, PropertyList) = ("Mode", .integer(0o100644))
    let cases: [[UInt8]] = [
      PropertyList.dictionary([("$objects", .array([.string("$null")]))]).encoded(as: .binary),
      archive([("Size", .integer(1))]),
      archive([mode, ("ExtendedAttributes", .uid(3))], extra: [.dictionary([("NS.data", .data([1, 2, 3]))])]),
      archive([mode, ("ExtendedAttributes", .uid(3))], extra: [.string("no data")]),
      archive(
        [mode, ("ExtendedAttributes", .uid(3))],
        extra: [
          .dictionary([("NS.data", .data(PropertyList.dictionary([("user.x", .integer(1))]).encoded(as: .binary)))])
        ]),
      archive([mode, ("Target", .uid(3))], extra: [.integer(5)]),
    ]
    for bytes in cases {
      #expect(throws: BackupFileRecord.ReadError.self) {
        try BackupFileRecord.unarchive(bytes, relativePath: Array("Documents/x".utf8), flags: 1)
      }
    }
    #expect(throws: BackupFileRecord.ReadError.self) {
      try BackupFileRecord.unarchive(Self.record.archive(), relativePath: [], flags: 3)
    }
  }

  @Test("the plists: Manifest.plist and Status.plist binary, Info.plist XML, each as a device writes it")
  func plists() throws {
    let plists = BackupPlists(bundleID: "com.example.app", source: "/data/app", now: 1_700_000_000)
    let manifest = plists.manifest.encoded(as: .binary)
    #expect(try BackupPlists.isEncrypted(manifest: manifest) == false)
    #expect(plists.manifest["Applications"]?["com.example.app"]?["CFBundleIdentifier"] == .string("com.example.app"))
    #expect(plists.manifest["Date"] == .date(1_700_000_000 - 978_307_200))
    let info = plists.info.encoded(as: .xml)
    #expect(String(decoding: info, as: UTF8.self).contains("<key>Installed Applications</key>"))
    #expect(try PropertyList(decoding: info) == plists.info)
    #expect(plists.status["IsFullBackup"] == .boolean(true))
    let uuid = try #require(plists.status["UUID"]?.stringValue)
    #expect(uuid.count == 36 && uuid.split(separator: "-").map(\.count) == [8, 4, 4, 4, 12])
    #expect(uuid != BackupPlists.randomUUID())
    let encrypted = PropertyList.dictionary([("IsEncrypted", .boolean(true))])
    #expect(try BackupPlists.isEncrypted(manifest: encrypted.encoded(as: .xml)))
    #expect(throws: BackupError.self) { try BackupPlists.isEncrypted(manifest: Array("junk".utf8)) }
    #expect(throws: BackupError.self) {
      try BackupPlists.isEncrypted(manifest: PropertyList.array([]).encoded(as: .binary))
    }
  }
}
