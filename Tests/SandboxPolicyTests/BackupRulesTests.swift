import Testing

@testable import SandboxPolicy

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
}
