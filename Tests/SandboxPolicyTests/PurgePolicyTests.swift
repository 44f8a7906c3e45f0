import Testing

@testable import SandboxPolicy

@Suite("PurgePolicy")
struct PurgePolicyTests {
  /// A catalog with three Caches files (sizes 10, 30, 20; used at 1, 2, 3) and a tmp file.
  func catalog(_ policy: PurgePolicy) -> PurgeCatalog {
    let catalog = PurgeCatalog()
    catalog.policy = policy
    catalog.addFile(ino: 1, parent: .root(.caches), name: Array("a".utf8), bytes: 10, lastUse: 1)
    catalog.addFile(ino: 2, parent: .root(.caches), name: Array("b".utf8), bytes: 30, lastUse: 2)
    catalog.addFile(ino: 3, parent: .root(.caches), name: Array("c".utf8), bytes: 20, lastUse: 3)
    catalog.addFile(ino: 4, parent: .root(.tmp), name: Array("t".utf8), bytes: 5, lastUse: 9)
    return catalog
  }

  @Test("LRU: a use moves a file to the end")
  func lru() {
    let catalog = catalog(.lru)
    catalog.touch(ino: 1, at: 10)
    #expect(catalog.chooseVictims(toFree: 100).map(\.ino) == [4, 2, 3, 1])
  }

  @Test("FIFO: uses change nothing; oldest first")
  func fifo() {
    let catalog = catalog(.fifo)
    #expect(catalog.touch(ino: 1, at: 10))
    #expect(!catalog.touch(ino: 99, at: 10))
    #expect(catalog.chooseVictims(toFree: 100).map(\.ino) == [4, 1, 2, 3])
    #expect(catalog.chooseVictims(toFree: 6).map(\.ino) == [4, 1])
  }

  @Test("largest: tmp first still, then the largest Caches files, only as many as needed, never open ones")
  func largest() {
    let catalog = catalog(.largest)
    #expect(catalog.chooseVictims(toFree: 100).map(\.ino) == [4, 2, 3, 1])
    #expect(catalog.chooseVictims(toFree: 6).map(\.ino) == [4, 2])
    _ = catalog.open(ino: 2)
    #expect(catalog.chooseVictims(toFree: 6).map(\.ino) == [4, 3])
    _ = catalog.setUrgency(ino: 1, .high)
    #expect(catalog.chooseVictims(toFree: 6).map(\.ino) == [4, 1])
  }

  @Test(arguments: [("lru", PurgePolicy.lru), ("FIFO", .fifo), ("largest", .largest)])
  func parsing(_ text: String, _ policy: PurgePolicy) {
    #expect(PurgePolicy(parsing: text) == policy)
    #expect(PurgePolicy(parsing: "random") == nil)
  }
}
