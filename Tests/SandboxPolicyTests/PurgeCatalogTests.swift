import Testing

@testable import SandboxPolicy

/// Bytes of a string, for short test names.
fileprivate func b(_ text: String) -> [UInt8] { Array(text.utf8) }

/// A path as one `/`-joined string, for readable expectations.
fileprivate func joined(_ path: [[UInt8]]?) -> String? {
  path.map { $0.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/") }
}

@Suite("PurgeCatalog")
struct PurgeCatalogTests {
  @Test func victimOrderTmpBeforeCachesUrgencyBeforeLRU() {
    let catalog = PurgeCatalog()
    catalog.addFile(ino: 1, parent: .root(.caches), name: b("c-old"), bytes: 10, lastUse: 1)
    catalog.addFile(ino: 2, parent: .root(.caches), name: b("c-high"), bytes: 10, urgency: .high, lastUse: 9)
    catalog.addFile(ino: 3, parent: .root(.tmp), name: b("t-new"), bytes: 10, lastUse: 50)
    catalog.addFile(ino: 4, parent: .root(.tmp), name: b("t-low"), bytes: 10, urgency: .low, lastUse: 60)
    catalog.addFile(ino: 5, parent: .root(.caches), name: b("c-med"), bytes: 10, urgency: .medium, lastUse: 2)
    catalog.addFile(ino: 6, parent: .root(.tmp), name: b("t-old"), bytes: 10, lastUse: 5)
    catalog.addFile(ino: 7, parent: .root(.caches), name: b("c-low"), bytes: 10, urgency: .low, lastUse: 3)
    let order = catalog.chooseVictims(toFree: 1000).map(\.ino)
    #expect(order == [4, 6, 3, 2, 5, 7, 1])
    #expect(catalog.victims(inDomain: .tmp).map(\.ino) == [4, 6, 3])
    #expect(catalog.victims(inDomain: .caches).map(\.ino) == [2, 5, 7, 1])
    #expect(catalog.victims(inDomain: .documents).isEmpty)
    #expect(catalog.totalPurgeableBytes == 70)
    #expect(catalog.purgeableBytes(domain: .tmp) == 30)
  }

  @Test func stopsOnceEnoughBytesAreChosen() {
    let catalog = PurgeCatalog()
    for ino in UInt64(1)...5 {
      catalog.addFile(ino: ino, parent: .root(.caches), name: b("f\(ino)"), bytes: 100, lastUse: UInt32(ino))
    }
    #expect(catalog.chooseVictims(toFree: 0).isEmpty)
    #expect(catalog.chooseVictims(toFree: 1).map(\.ino) == [1])
    #expect(catalog.chooseVictims(toFree: 100).map(\.ino) == [1])
    #expect(catalog.chooseVictims(toFree: 101).map(\.ino) == [1, 2])
    #expect(catalog.chooseVictims(toFree: 10_000).map(\.ino) == [1, 2, 3, 4, 5])
    #expect(catalog.count == 5)  // choosing removes nothing
  }

  @Test(arguments: [PurgePolicy.lru, .largest])
  func sparedFilesAreNotChosen(policy: PurgePolicy) {
    let catalog = PurgeCatalog()
    catalog.policy = policy
    catalog.addFile(ino: 1, parent: .root(.tmp), name: b("t"), bytes: 300, lastUse: 1)
    catalog.addFile(ino: 2, parent: .root(.caches), name: b("c1"), bytes: 200, lastUse: 2)
    catalog.addFile(ino: 3, parent: .root(.caches), name: b("c2"), bytes: 100, lastUse: 3)
    #expect(catalog.chooseVictims(toFree: 100).map(\.ino) == [1])
    #expect(catalog.chooseVictims(toFree: 100, sparing: [1]).map(\.ino) == [2])
    #expect(catalog.chooseVictims(toFree: 250, sparing: [1]).map(\.ino) == [2, 3])
    #expect(catalog.chooseVictims(toFree: 100, sparing: [1, 2, 3]).isEmpty)
  }

  @Test func touchMovesToMostRecentlyUsed() {
    let catalog = PurgeCatalog()
    for ino in UInt64(1)...4 {
      catalog.addFile(ino: ino, parent: .root(.tmp), name: b("f\(ino)"), bytes: 1, lastUse: 10)
    }
    #expect(catalog.victims(inDomain: .tmp).map(\.ino) == [1, 2, 3, 4])
    #expect(catalog.touch(ino: 1, at: 10))
    #expect(catalog.victims(inDomain: .tmp).map(\.ino) == [2, 3, 4, 1])
    catalog.touch(ino: 3, at: 20)
    catalog.touch(ino: 2, at: 30)
    #expect(catalog.victims(inDomain: .tmp).map(\.ino) == [4, 1, 3, 2])
    // An older time goes to its lastUse place, not to the newest end.
    catalog.touch(ino: 2, at: 15)
    #expect(catalog.victims(inDomain: .tmp).map(\.ino) == [4, 1, 2, 3])
    #expect(catalog.entry(ino: 2)?.lastUse == 15)
    #expect(!catalog.touch(ino: 99, at: 1))
  }

  @Test func openFilesAreSkipped() {
    let catalog = PurgeCatalog()
    for ino in UInt64(1)...3 {
      catalog.addFile(ino: ino, parent: .root(.tmp), name: b("f\(ino)"), bytes: 10, lastUse: UInt32(ino))
    }
    catalog.open(ino: 1)
    catalog.open(ino: 1)
    #expect(catalog.purgeableBytes(domain: .tmp) == 20)
    #expect(catalog.trackedBytes(domain: .tmp) == 30)
    #expect(catalog.chooseVictims(toFree: 15).map(\.ino) == [2, 3])
    catalog.close(ino: 1)
    #expect(catalog.chooseVictims(toFree: 15).map(\.ino) == [2, 3])
    #expect(catalog.entry(ino: 1)?.openCount == 1)
    catalog.close(ino: 1)
    #expect(catalog.chooseVictims(toFree: 15).map(\.ino) == [1, 2])
    #expect(catalog.purgeableBytes(domain: .tmp) == 30)
  }

  @Test func urgencyChangeMovesBuckets() {
    let catalog = PurgeCatalog()
    catalog.addFile(ino: 1, parent: .root(.caches), name: b("a"), bytes: 1, lastUse: 1)
    catalog.addFile(ino: 2, parent: .root(.caches), name: b("b"), bytes: 1, lastUse: 2)
    catalog.setUrgency(ino: 2, .high)
    #expect(catalog.victims(inDomain: .caches).map(\.ino) == [2, 1])
    #expect(catalog.entry(ino: 2)?.urgency == .high)
    catalog.setUrgency(ino: 2, .none)
    #expect(catalog.victims(inDomain: .caches).map(\.ino) == [1, 2])
  }

  @Test func ageBasedVictims() {
    let catalog = PurgeCatalog()
    catalog.addFile(ino: 1, parent: .root(.caches), name: b("a"), bytes: 1, lastUse: 100)
    catalog.addFile(ino: 2, parent: .root(.caches), name: b("b"), bytes: 1, lastUse: 200)
    catalog.addFile(ino: 3, parent: .root(.tmp), name: b("c"), bytes: 1, lastUse: 150)
    catalog.addFile(ino: 4, parent: .root(.caches), name: b("d"), bytes: 1, urgency: .low, lastUse: 50)
    #expect(catalog.victims(olderThan: 160).map(\.ino) == [3, 4, 1])
    #expect(catalog.victims(olderThan: 160, domain: .caches).map(\.ino) == [4, 1])
    #expect(catalog.victims(olderThan: 50).isEmpty)
  }

  @Test func entrySnapshotAndBytes() throws {
    let catalog = PurgeCatalog()
    catalog.registerDirectory(ino: 10, parent: .root(.caches), name: b("d"))
    catalog.addFile(ino: 1, parent: .directory(10), name: [0xFF, 0x41], bytes: 7, urgency: .medium, lastUse: 3)
    let entry = try #require(catalog.entry(ino: 1))
    #expect(
      entry
        == PurgeCatalog.Entry(
          domain: .caches, bytes: 7, urgency: .medium, lastUse: 3, openCount: 0,
          parent: .directory(10), name: [0xFF, 0x41]))
    catalog.setBytes(ino: 1, 4096)
    #expect(catalog.purgeableBytes(domain: .caches) == 4096)
    #expect(catalog.contains(ino: 1))
    #expect(catalog.removeFile(ino: 1))
    #expect(!catalog.removeFile(ino: 1))
    #expect(!catalog.contains(ino: 1))
    #expect(catalog.purgeableBytes(domain: .caches) == 0)
    #expect(catalog.entry(ino: 1) == nil)
  }

  @Test func pathsFollowMovesAndRenames() {
    let catalog = PurgeCatalog()
    catalog.registerDirectory(ino: 10, parent: .root(.caches), name: b("a"))
    catalog.registerDirectory(ino: 11, parent: .directory(10), name: b("b"))
    catalog.registerDirectory(ino: 12, parent: .root(.tmp), name: b("t"))
    catalog.addFile(ino: 1, parent: .directory(11), name: b("f.dat"), bytes: 5, lastUse: 1)
    catalog.addFile(ino: 2, parent: .root(.tmp), name: b("g"), bytes: 5, lastUse: 1)
    #expect(joined(catalog.path(ofFile: 1)) == "Library/Caches/a/b/f.dat")
    #expect(joined(catalog.path(ofFile: 2)) == "tmp/g")
    #expect(joined(catalog.path(ofDirectory: 11)) == "Library/Caches/a/b")
    #expect(catalog.path(ofFile: 99) == nil)

    // Directory rename updates descendants' paths.
    catalog.renameDirectory(ino: 10, to: .root(.caches), newName: b("renamed"))
    #expect(joined(catalog.path(ofFile: 1)) == "Library/Caches/renamed/b/f.dat")
    // File rename within the domain.
    catalog.moveFile(ino: 1, to: .directory(10), newName: b("h.dat"))
    #expect(joined(catalog.path(ofFile: 1)) == "Library/Caches/renamed/h.dat")
    #expect(catalog.entry(ino: 1)?.parent == .directory(10))
    // File move from tmp to caches changes its domain and bytes.
    catalog.moveFile(ino: 2, to: .directory(11), newName: b("g2"))
    #expect(joined(catalog.path(ofFile: 2)) == "Library/Caches/renamed/b/g2")
    #expect(catalog.entry(ino: 2)?.domain == .caches)
    #expect(catalog.purgeableBytes(domain: .tmp) == 0)
    #expect(catalog.purgeableBytes(domain: .caches) == 10)
    // Directory moved from caches into tmp: its files follow.
    catalog.renameDirectory(ino: 11, to: .directory(12), newName: b("moved"))
    #expect(joined(catalog.path(ofFile: 2)) == "tmp/t/moved/g2")
    #expect(catalog.domainOfDirectory(ino: 11) == .tmp)
    #expect(catalog.entry(ino: 2)?.domain == .tmp)
    #expect(catalog.victims(inDomain: .tmp).map(\.ino) == [2])
    #expect(catalog.victims(inDomain: .caches).map(\.ino) == [1])
    #expect(catalog.purgeableBytes(domain: .tmp) == 5)
  }

  @Test func removeSubtree() {
    let catalog = PurgeCatalog()
    catalog.registerDirectory(ino: 10, parent: .root(.caches), name: b("a"))
    catalog.registerDirectory(ino: 11, parent: .directory(10), name: b("b"))
    catalog.registerDirectory(ino: 12, parent: .directory(11), name: b("c"))
    catalog.registerDirectory(ino: 13, parent: .root(.caches), name: b("keep"))
    catalog.addFile(ino: 1, parent: .directory(10), name: b("1"), bytes: 1, lastUse: 1)
    catalog.addFile(ino: 2, parent: .directory(12), name: b("2"), bytes: 1, lastUse: 1)
    catalog.addFile(ino: 3, parent: .directory(13), name: b("3"), bytes: 1, lastUse: 1)
    catalog.addFile(ino: 4, parent: .root(.caches), name: b("4"), bytes: 1, lastUse: 1)
    catalog.open(ino: 2)
    let removed = catalog.removeSubtree(directory: 11)
    #expect(removed == [2])
    #expect(!catalog.containsDirectory(ino: 11) && !catalog.containsDirectory(ino: 12))
    #expect(catalog.containsDirectory(ino: 10))
    #expect(catalog.trackedBytes(domain: .caches) == 3)
    #expect(catalog.purgeableBytes(domain: .caches) == 3)
    #expect(Set(catalog.removeSubtree(directory: 10)) == [1])
    #expect(catalog.removeSubtree(directory: 10).isEmpty)
    #expect(catalog.count == 2 && catalog.directoryCount == 1)
    #expect(catalog.victims(inDomain: .caches).map(\.ino) == [3, 4])
    // The emptied directory slots are reused, and removeDirectory works on empty ones.
    catalog.registerDirectory(ino: 20, parent: .root(.tmp), name: b("new"))
    #expect(catalog.directories.count == 4)
    #expect(catalog.removeFile(ino: 3))
    #expect(catalog.removeDirectory(ino: 13))
    #expect(!catalog.removeDirectory(ino: 13))
    #expect(catalog.directoryCount == 1)
  }

  @Test func nameArenaCompactionKeepsNames() {
    let catalog = PurgeCatalog(compactionThreshold: 64)
    catalog.registerDirectory(ino: 1000, parent: .root(.tmp), name: b("dir"))
    for ino in UInt64(1)...200 {
      catalog.addFile(ino: ino, parent: .directory(1000), name: b("file-\(ino)-name"), bytes: 1, lastUse: 1)
    }
    for ino in UInt64(1)...200 where ino % 3 != 0 { catalog.removeFile(ino: ino) }
    for ino in UInt64(1)...200 where ino % 3 == 0 {
      catalog.moveFile(ino: ino, to: .directory(1000), newName: b("renamed-\(ino)"))
    }
    #expect(catalog.nameCompactions > 0)
    #expect(catalog.garbageNameBytes * 2 <= catalog.names.count + 64)
    for ino in UInt64(1)...200 where ino % 3 == 0 {
      #expect(joined(catalog.path(ofFile: ino)) == "tmp/dir/renamed-\(ino)")
    }
    #expect(joined(catalog.path(ofDirectory: 1000)) == "tmp/dir")
  }

  @Test func freeListReusesSlots() {
    let catalog = PurgeCatalog()
    for ino in UInt64(1)...100 {
      catalog.addFile(ino: ino, parent: .root(.tmp), name: b("x"), bytes: 1, lastUse: 1)
    }
    for ino in UInt64(1)...100 { catalog.removeFile(ino: ino) }
    for ino in UInt64(101)...200 {
      catalog.addFile(ino: ino, parent: .root(.caches), name: b("y"), bytes: 1, lastUse: 2)
    }
    #expect(catalog.files.count == 100)
    #expect(catalog.count == 100)
    #expect(catalog.victims(inDomain: .caches).map(\.ino) == Array(UInt64(101)...200))
    #expect(catalog.victims(inDomain: .tmp).isEmpty)
  }

  @Test func bulkLoadSortsByLastUse() {
    let catalog = PurgeCatalog()
    catalog.beginBulkLoad()
    let times: [UInt32] = [50, 10, 40, 10, 30]
    for (index, time) in times.enumerated() {
      catalog.addFile(ino: UInt64(index + 1), parent: .root(.caches), name: b("f"), bytes: 1, lastUse: time)
    }
    catalog.endBulkLoad()
    #expect(catalog.victims(inDomain: .caches).map(\.ino) == [2, 4, 5, 3, 1])
  }

  @Test func approximateMemoryIsReported() {
    let catalog = PurgeCatalog()
    #expect(MemoryLayout<PurgeCatalog.FileSlot>.stride == 48)
    catalog.addFile(ino: 1, parent: .root(.tmp), name: b("x"), bytes: 1, lastUse: 1)
    #expect(catalog.approximateMemoryBytes > 48)
  }
}
