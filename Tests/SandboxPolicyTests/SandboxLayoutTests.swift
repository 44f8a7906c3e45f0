import Testing

@testable import SandboxPolicy

@Suite("SandboxLayout")
struct SandboxLayoutTests {
  @Test(
    "names of fixed directories, by parent",
    arguments: [
      ("Documents", SandboxLayout.Parent.root, SandboxLayout.FixedDirectory?.some(.documents)),
      ("Library", .root, .library),
      ("tmp", .root, .tmp),
      ("Caches", .root, nil),
      ("Application Support", .library, .applicationSupport),
      ("Preferences", .library, .preferences),
      ("Caches", .library, .caches),
      ("Documents", .library, nil),
      ("Documents", .other, nil),
      ("Caches", .other, nil),
      ("documents", .root, nil),
    ])
  func fixedDirectoryNames(name: String, parent: SandboxLayout.Parent, expected: SandboxLayout.FixedDirectory?) {
    #expect(SandboxLayout.fixedDirectory(named: Array(name.utf8), in: parent) == expected)
    #expect(SandboxLayout.allowsRemoval(of: Array(name.utf8), in: parent) == (expected == nil))
  }

  @Test("paths, domains, and what may be created where")
  func pathsAndDomains() {
    #expect(SandboxLayout.FixedDirectory.caches.path == "Library/Caches")
    #expect(SandboxLayout.FixedDirectory.applicationSupport.domain == .applicationSupport)
    #expect(
      SandboxLayout.creationOrder.map(\.path) == [
        "Documents", "Library", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp",
      ])
    #expect(!SandboxLayout.allowsNewEntries(in: .root))
    #expect(SandboxLayout.allowsNewEntries(in: .library))
    #expect(SandboxLayout.allowsNewEntries(in: .other))
  }
}
