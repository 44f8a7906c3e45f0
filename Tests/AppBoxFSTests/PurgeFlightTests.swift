import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A victim in flight belongs to the one purge that took it: the books know files by their
/// backing inode number, and a number can name a file on the catalog while a purge still
/// holds it (a rename put the file back; or the purge unlinked its victim and a new file
/// got the number before the purge had finished with it). No second purge takes it then,
/// and one purge's steps never settle another's victim (docs/architecture.md, "Purging").
@Suite("Victims in flight")
struct PurgeFlightTests {
  /// Takes every file of Caches off the catalog, as a purge plans.
  static func planCaches(_ box: Sandbox) -> StorageState.PurgePlan {
    box.fs.storage.plan(reason: .explicit) { catalog, _ in catalog.victims(inDomain: .caches) }
  }

  @Test("a file back on the catalog while a purge holds it: no second purge takes it, an open pins it, the books hold")
  func secondPurgeLeavesItAlone() throws {
    let box = try Sandbox()
    try box.makeFile("Library/Caches/a", bytes: 8192)
    let first = Self.planCaches(box)
    try #require(first.victims.count == 1)
    let ino = first.victims[0].ino
    // Renamed while the first purge holds it: back on the catalog under its new name.
    try box.rename("Library/Caches/a", to: "Library/Caches/b")
    let second = Self.planCaches(box)
    #expect(second.victims.isEmpty, "a number one purge holds is not taken by another")
    box.fs.carryOut(first, onRequestThread: false)  // its name changed: let go
    box.fs.carryOut(second, onRequestThread: false)
    #expect(box.backingHas("Library/Caches/b"))
    let file = try box.open("Library/Caches/b")
    #expect(
      box.fs.storage.books.withLock { $0.catalog.entry(ino: ino)?.openCount } == 1,
      "the open is counted on the catalog, where every purge looks")
    #expect(box.fs.purge(.domain(.caches)).files == 0, "open: not purged")
    box.release(file)
    #expect(box.fs.purge(.domain(.caches)).files == 1, "closed: purgeable again")
    try box.expectExactBooks()
  }

  @Test("a victim unlinked, its number a new file's before the purge finishes: no second purge takes that file")
  func numberGivenOutBeforeFinish() throws {
    let box = try Sandbox()
    try box.makeFile("Library/Caches/a", bytes: 8192)
    let used = box.used
    let first = Self.planCaches(box)
    try #require(first.victims.count == 1)
    let victim = first.victims[0]
    #expect(box.fs.storage.commit(victim.ino, plan: first.serial) == 8192)
    // The purge's unlink frees the number; a file created right then gets it and is
    // tracked (as `track` records a new file) before the purge finishes.
    try Sys.unlink(box.backing + "/Library/Caches/a")
    box.fs.storage.books.withLock { books in
      books.catalog.addFile(
        ino: victim.ino, parent: victim.parent, name: Array("h".utf8), bytes: 4096, lastUse: victim.lastUse)
    }
    let second = Self.planCaches(box)
    #expect(second.victims.isEmpty, "the number is the first purge's until it finishes")
    #expect(box.fs.storage.commit(victim.ino, plan: second.serial) == nil, "nor does another plan commit to it")
    box.fs.storage.finish(victim, bytes: 8192, plan: first.serial)
    box.fs.storage.books.withLock { books in
      #expect(books.inFlight.isEmpty)
      #expect(books.catalog.contains(ino: victim.ino), "the new file stays on the catalog, where an open pins it")
      #expect(books.ledger.used == used - 8192, "the victim's bytes left the books")
    }
    let third = Self.planCaches(box)
    #expect(third.victims.map(\.ino) == [victim.ino], "once the purge is done, the new file is purgeable")
  }
}
