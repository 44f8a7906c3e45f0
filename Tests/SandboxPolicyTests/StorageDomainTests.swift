import Testing

@testable import SandboxPolicy

@Suite("StorageDomain")
struct StorageDomainTests {
  static let paths: [(String, StorageDomain)] = [
    ("", .root), ("Documents", .documents), ("Documents/a/b", .documents),
    ("Library", .library), ("Library/Caches", .caches), ("Library/Caches/x", .caches),
    ("Library/Caches/a/b/c", .caches), ("Library/Application Support/db", .applicationSupport),
    ("Library/Preferences/p.plist", .preferences), ("Library/Cookies/c", .library),
    ("Library/caches/x", .library), ("tmp", .tmp), ("tmp/x/y", .tmp), ("TMP/x", .root),
    ("other", .root), ("documents", .root),
  ]

  @Test(arguments: paths)
  func classify(_ path: String, _ domain: StorageDomain) {
    let components = path.isEmpty ? [] : path.split(separator: "/").map { Array($0.utf8) }
    #expect(StorageDomain.classify(components: components) == domain)
  }

  @Test func classifyNonUTF8() {
    #expect(StorageDomain.classify(components: [Array("tmp".utf8), [0xFF, 0x00]]) == .tmp)
    #expect(StorageDomain.classify(components: [[0xFF]]) == .root)
  }

  static let domainProperties: [(StorageDomain, Bool, Bool, String, String)] = [
    (.documents, false, true, "Documents", "documents"),
    (.applicationSupport, false, true, "Application Support", "applicationSupport"),
    (.preferences, false, true, "Preferences", "preferences"),
    (.caches, true, false, "Caches", "caches"),
    (.tmp, true, false, "tmp", "tmp"),
    (.library, false, true, "Library", "library"),
    (.root, false, true, "root", "root"),
  ]

  @Test(arguments: domainProperties)
  func properties(
    _ domain: StorageDomain, _ purgeable: Bool, _ backedUp: Bool, _ name: String, _ machine: String
  ) {
    #expect(domain.isPurgeable == purgeable)
    #expect(domain.isBackedUp == backedUp)
    #expect(domain.name == name)
    #expect(domain.machineName == machine)
    #expect(StorageDomain(machineName: machine) == domain)
    #expect((domain.purgeRank != nil) == purgeable)
    #expect(StorageDomain.classify(components: domain.rootComponents) == domain)
  }

  @Test func purgeOrder() {
    #expect(StorageDomain.purgeOrder == [.tmp, .caches])
    #expect(StorageDomain.tmp.purgeRank == 0)
    #expect(StorageDomain.caches.purgeRank == 1)
  }
}
