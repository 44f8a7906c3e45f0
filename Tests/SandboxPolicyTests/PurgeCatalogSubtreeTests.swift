import Testing

@testable import SandboxPolicy

/// Subtrees moving into the catalog from another domain (`addFiles`) and the test that
/// tells whether a directory is inside a moving subtree.
@Suite("PurgeCatalog subtrees")
struct PurgeCatalogSubtreeTests {
  private static func b(_ text: String) -> [UInt8] { Array(text.utf8) }

  @Test("addFiles places each file at its own last use, ties in the order given, as addFile one by one would")
  func addFilesMatchesOneByOne() {
    let existing: [(UInt64, UInt32)] = [(1, 5), (2, 10), (3, 10), (4, 20)]
    let batch: [(UInt64, UInt32)] = [(10, 10), (11, 1), (12, 25), (13, 10), (14, 5), (15, 1)]
    let batched = PurgeCatalog()
    let single = PurgeCatalog()
    for catalog in [batched, single] {
      catalog.registerDirectory(ino: 100, parent: .root(.caches), name: Self.b("d"))
      for (ino, time) in existing {
        catalog.addFile(ino: ino, parent: .root(.caches), name: Self.b("e\(ino)"), bytes: 1, lastUse: time)
      }
    }
    let additions = batch.map { ino, time in
      PurgeCatalog.Addition(
        ino: ino, parent: .directory(100), name: Self.b("f\(ino)"), bytes: 2, urgency: .none, lastUse: time)
    }
    #expect(batched.addFiles(additions) == batch.map(\.0))
    for addition in additions {
      single.addFile(
        ino: addition.ino, parent: addition.parent, name: addition.name, bytes: addition.bytes,
        lastUse: addition.lastUse)
    }
    let order = single.victims(inDomain: .caches).map(\.ino)
    #expect(batched.victims(inDomain: .caches).map(\.ino) == order)
    #expect(order == [11, 15, 1, 14, 2, 3, 10, 13, 4, 12])
    #expect(batched.purgeableBytes(domain: .caches) == 16)
    #expect(
      batched.path(ofFile: 12).map { $0.map { String(decoding: $0, as: UTF8.self) } } == [
        "Library", "Caches", "d", "f12",
      ])
  }

  @Test("addFiles skips files already tracked and files whose directory is gone; urgency picks the list")
  func addFilesSkips() {
    let catalog = PurgeCatalog()
    catalog.registerDirectory(ino: 100, parent: .root(.tmp), name: Self.b("d"))
    catalog.addFile(ino: 1, parent: .root(.tmp), name: Self.b("a"), bytes: 1, lastUse: 1)
    let added = catalog.addFiles([
      .init(ino: 1, parent: .directory(100), name: Self.b("again"), bytes: 1, urgency: .none, lastUse: 1),
      .init(ino: 100, parent: .root(.tmp), name: Self.b("dir"), bytes: 1, urgency: .none, lastUse: 1),
      .init(ino: 2, parent: .directory(999), name: Self.b("orphan"), bytes: 1, urgency: .none, lastUse: 1),
      .init(ino: 3, parent: .directory(100), name: Self.b("high"), bytes: 1, urgency: .high, lastUse: 50),
    ])
    #expect(added == [3])
    #expect(catalog.count == 2)
    #expect(catalog.victims(inDomain: .tmp).map(\.ino) == [3, 1])
  }

  @Test("isDirectory(_:inside:) follows the parent chain")
  func inside() {
    let catalog = PurgeCatalog()
    catalog.registerDirectory(ino: 1, parent: .root(.caches), name: Self.b("a"))
    catalog.registerDirectory(ino: 2, parent: .directory(1), name: Self.b("b"))
    catalog.registerDirectory(ino: 3, parent: .directory(2), name: Self.b("c"))
    catalog.registerDirectory(ino: 4, parent: .root(.caches), name: Self.b("other"))
    #expect(catalog.isDirectory(3, inside: 1))
    #expect(catalog.isDirectory(1, inside: 1))
    #expect(catalog.isDirectory(3, inside: 2))
    #expect(!catalog.isDirectory(2, inside: 3))
    #expect(!catalog.isDirectory(4, inside: 1))
    #expect(!catalog.isDirectory(9, inside: 1))
    #expect(!catalog.isDirectory(1, inside: 9))
  }
}
