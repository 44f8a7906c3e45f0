import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A directory moves between domains with one rename, as on a device, and its subtree's
/// books move with it: usage by domain, the purge catalog, the inodes the kernel holds.
@Suite("Directories moving between domains through the protocol")
struct DomainMoveTests {
  /// A directory with files `a`, `b`, `sub/c` and a symlink `link` to `a`; their contents.
  @discardableResult
  static func makeTree(_ box: Sandbox, _ path: String) throws -> [String: [UInt8]] {
    try box.mkdir(path)
    try box.mkdir(path + "/sub")
    var contents: [String: [UInt8]] = [:]
    for (index, name) in ["a", "b", "sub/c"].enumerated() {
      contents[name] = pattern(30_000 * (index + 1), seed: UInt64(index))
      try box.writeFile(path + "/" + name, contents[name]!)
    }
    try box.symlink("a", at: path + "/link")
    return contents
  }

  /// Expects a new filesystem over the same backing tree to find the books this one keeps.
  static func expectRemountAgrees(_ box: Sandbox, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let again = try box.remount()
    #expect(again.usage == box.usage, sourceLocation: sourceLocation)
    #expect(again.tracked == box.tracked, sourceLocation: sourceLocation)
    #expect(again.purgeableFiles == box.purgeableFiles, sourceLocation: sourceLocation)
  }

  @Test(
    "a directory moves to another domain with one rename; its usage, catalog entries and inode go with it, as a remount finds",
    arguments: [
      ("tmp/d", "Documents/d"), ("Documents/d", "Library/Caches/d"), ("Library/Caches/d", "tmp/d"),
      ("Library/Application Support/d", "Library/Preferences/d"), ("tmp/d", "Library/Caches/x/d"),
    ])
  func moves(source: String, target: String) throws {
    let box = try Sandbox()
    if target.hasPrefix("Library/Caches/x/") { try box.mkdir("Library/Caches/x") }
    let contents = try Self.makeTree(box, source)
    let node = try box.lookup(source)
    let ino = try box.backingStat(source).st_ino
    try box.expectExactBooks()
    try box.rename(source, to: target)
    #expect(try box.lookup(target) == node)
    #expect(try box.backingStat(target).st_ino == ino)
    for (name, bytes) in contents { #expect(try box.contents(target + "/" + name) == bytes, "\(name)") }
    #expect(try box.readlink(target + "/link") == "a")
    #expect(!box.backingHas(source))
    try box.expectExactBooks()
    try Self.expectRemountAgrees(box)
  }

  @Test(
    "a directory keeps its inode across domains and back (no copy), its contents with it",
    arguments: [
      ("Documents/d", "tmp/d"), ("Library/Caches/d", "Documents/d"), ("tmp/d", "Library/Application Support/d"),
      ("Library/Preferences/d", "Library/Caches/d"),
    ])
  func moveAndBack(source: String, target: String) throws {
    let box = try Sandbox()
    try box.mkdir(source)
    try box.writeFile(source + "/f", bytes("f"))
    let ino = try box.backingStat(source).st_ino
    try box.rename(source, to: target)
    #expect(try box.contents(target + "/f") == bytes("f"))
    #expect(throws: Errno.noEntry) { try box.lookup(source) }
    #expect(!box.backingHas(source))
    try box.rename(target, to: source)
    #expect(try box.backingStat(source).st_ino == ino)
    #expect(try box.backingContents(source + "/f") == bytes("f"))
    try box.expectExactBooks()
  }

  @Test("moving out of tmp and Caches takes the files off the purge catalog; moving in puts each at its own last use")
  func purgeCatalogFollows() throws {
    let box = try Sandbox()
    try Self.makeTree(box, "tmp/d")
    try box.rename("tmp/d", to: "Documents/d")
    #expect(box.fs.purge(.domain(.tmp)).files == 0)
    #expect(box.backingHas("Documents/d/sub/c"))
    // A file last used long ago, moved into Caches, goes before one used now (its own
    // times place it, as the mount-time index would).
    try box.setTimes("Documents/d/b", seconds: 1_000_000_000)
    try box.writeFile("Library/Caches/recent", pattern(30_000))
    try box.rename("Documents/d", to: "Library/Caches/d")
    try box.expectExactBooks()
    #expect(box.fs.purge(.bytes(1)).files == 1)
    #expect(box.purgedPaths().last == "Library/Caches/d/b")
    #expect(box.fs.purge(.domain(.caches)).files == 3)
    #expect(box.backingList("Library/Caches/d") == ["link", "sub"])
    try box.expectExactBooks()
  }

  @Test("a directory moving between Caches and tmp stays purgeable, now in its new domain's turn")
  func betweenPurgeableDomains() throws {
    let box = try Sandbox()
    try Self.makeTree(box, "Library/Caches/d")
    let trackedFiles = box.purgeableFiles
    try box.rename("Library/Caches/d", to: "tmp/d")
    #expect(box.purgeableFiles == trackedFiles)
    #expect(box.purgeable[.caches] == 0)
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.caches)).files == 0)
    #expect(box.fs.purge(.domain(.tmp)).files == 3)
    try box.expectExactBooks()
  }

  @Test(
    "a file held open moves with its directory: writes after the move count in the new domain, and no purge takes it")
  func openFileMoves() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/d")
    let file = try box.create("Documents/d/f")
    #expect(try box.write(file, pattern(50_000)) == 50_000)
    try box.rename("Documents/d", to: "Library/Caches/d")
    #expect(try box.write(file, pattern(200_000, seed: 2), at: 50_000) == 200_000)
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.caches)).files == 0)
    try box.rename("Library/Caches/d", to: "tmp/d")
    #expect(try box.write(file, pattern(100_000, seed: 3), at: 250_000) == 100_000)
    try box.fsync(file)
    box.release(file)
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.tmp)).files == 1)
    try box.expectExactBooks()
  }

  @Test("a node the kernel holds below a moved directory takes the new domain")
  func heldNodesFollow() throws {
    let box = try Sandbox()
    try box.mkdir("tmp/d")
    try box.mkdir("tmp/d/e")
    try box.writeFile("tmp/d/e/f", pattern(10_000))
    let node = try box.lookup("tmp/d/e/f")
    try box.rename("tmp/d", to: "Documents/d")
    guard case .held(let inode) = box.fs.inodes.resolve(node) else {
      Issue.record("the node was dropped")
      return
    }
    #expect(inode.domain == .documents)
    let file = try box.open("Documents/d/e/f", flags: O_RDWR)
    #expect(try box.write(file, pattern(100_000), at: 10_000) == 100_000)
    box.release(file)
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.tmp)).files == 0)
  }

  @Test("RENAME_EXCHANGE of two directories in different domains swaps their books too")
  func exchange() throws {
    let box = try Sandbox()
    try Self.makeTree(box, "Documents/d")
    try Self.makeTree(box, "tmp/e")
    try box.rename("Documents/d", to: "tmp/e", flags: Linux.renameExchange)
    try box.expectExactBooks()
    // What was in Documents is in tmp now, purgeable; what was in tmp is kept.
    #expect(box.fs.purge(.domain(.tmp)).files == 3)
    #expect(throws: Errno.noEntry) { try box.lookup("tmp/e/a") }
    #expect(box.backingHas("Documents/d/sub/c"))
    try box.expectExactBooks()
  }

  @Test("RENAME_EXCHANGE of a directory with a directory or a file in another domain swaps them")
  func exchangeWithFile() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/d")
    try box.writeFile("Documents/d/inside", bytes("d"))
    try box.mkdir("tmp/e")
    try box.writeFile("tmp/f", bytes("f"))
    try box.rename("Documents/d", to: "tmp/e", flags: Linux.renameExchange)
    #expect(try box.contents("tmp/e/inside") == bytes("d"))
    #expect(try box.list("Documents/d") == [])
    try box.rename("Documents/d", to: "tmp/f", flags: Linux.renameExchange)
    #expect(try box.getattr("tmp/f").st_mode & S_IFMT == S_IFDIR)
    #expect(try box.contents("Documents/d") == bytes("f"))
    #expect(try box.backingContents("Documents/d") == bytes("f"))
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.tmp)).files == 1)
    #expect(box.purgedPaths() == ["tmp/e/inside"], "what came from Documents is purgeable in tmp")
  }

  @Test("RENAME_NOREPLACE across domains: EEXIST over an existing name (nothing moves), else the directory moves")
  func noReplace() throws {
    let box = try Sandbox()
    try Self.makeTree(box, "tmp/d")
    try box.mkdir("Documents/d")
    #expect(throws: Errno.exists) { try box.rename("tmp/d", to: "Documents/d", flags: Linux.renameNoReplace) }
    #expect(box.backingHas("tmp/d/a"))
    try box.expectExactBooks()
    try box.rename("tmp/d", to: "Documents/e", flags: Linux.renameNoReplace)
    #expect(box.backingHas("Documents/e/a"))
    try box.expectExactBooks()
    // A plain rename over an empty directory in another domain replaces it.
    try box.rename("Documents/e", to: "Documents/d")
    try box.mkdir("tmp/empty")
    try box.rename("Documents/d", to: "tmp/empty")
    #expect(box.backingHas("tmp/empty/sub/c"))
    try box.expectExactBooks()
  }

  @Test("a directory over a non-empty one in another domain is ENOTEMPTY, and nothing moves")
  func notEmptyTarget() throws {
    let box = try Sandbox()
    try Self.makeTree(box, "tmp/d")
    try box.mkdir("Documents/d")
    try box.writeFile("Documents/d/x", bytes("x"))
    #expect(throws: Errno.notEmpty) { try box.rename("tmp/d", to: "Documents/d") }
    #expect(box.backingHas("tmp/d/a") && box.backingHas("Documents/d/x"))
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.tmp)).files == 3, "still in tmp's books")
  }

  @Test("a directory holding a file with a link outside it stays in its domain (EXDEV); links all inside move with it")
  func hardLinks() throws {
    let box = try Sandbox()
    try Self.makeTree(box, "tmp/d")
    try box.link("tmp/d/a", as: "tmp/outside")
    #expect(throws: Errno.crossDevice) { try box.rename("tmp/d", to: "Documents/d") }
    #expect(box.backingHas("tmp/d/a") && !box.backingHas("Documents/d"))
    try box.unlink("tmp/outside")
    try box.link("tmp/d/a", as: "tmp/d/sub/a2")
    try box.rename("tmp/d", to: "Documents/d")
    #expect(try box.getattr("Documents/d/sub/a2").st_nlink == 2)
    try box.expectExactBooks()
    try Self.expectRemountAgrees(box)
  }

  @Test("a tree moved into tmp by a rename is purged file by file, its directories kept")
  func movedTreePurged() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/d")
    for level in 0..<5 {
      let path = "Documents/d" + String(repeating: "/s", count: level)
      if level > 0 { try box.mkdir(path) }
      try box.writeFile(path + "/f", pattern(5000, seed: UInt64(level)))
    }
    try box.rename("Documents/d", to: "tmp/d")
    #expect(box.purgeableFiles == 5)
    #expect(box.fs.purge(.domain(.tmp)).files == 5)
    #expect(box.backingList("tmp/d/s/s/s/s") == [])
    try box.expectExactBooks()
  }

  @Test("a purge planned while a directory moves takes nothing from it; one planned before gets nothing once it moved")
  func purgesDuringAMove() throws {
    let box = try Sandbox()
    try box.mkdir("Library/Caches/d")
    try box.writeFile("Library/Caches/d/f", pattern(8192))
    let directory = UInt64(try box.backingStat("Library/Caches/d").st_ino)
    let storage = box.fs.storage
    // A purge chooses the file, then the move starts (the rename is between these steps).
    let before = storage.plan(reason: .explicit) { catalog, _ in catalog.victims(inDomain: .caches) }
    #expect(before.victims.count == 1)
    #expect(storage.beginMove([directory]).isEmpty, "not committed to: given back, nothing to wait for")
    let during = storage.plan(reason: .explicit) { catalog, _ in catalog.victims(inDomain: .caches) }
    #expect(during.victims.isEmpty, "nothing is taken from a moving subtree")
    // What the rename does: the directory leaves Caches.
    try Sys.rename(box.backing + "/Library/Caches/d", to: box.backing + "/Documents/d")
    storage.endMove { books in _ = books.catalog.removeSubtree(directory: directory) }
    #expect(box.fs.carryOut(before, onRequestThread: false).isEmpty)
    #expect(box.fs.carryOut(during, onRequestThread: false).isEmpty)
    #expect(box.backingHas("Documents/d/f"), "no file unlinked in Documents")
    #expect(storage.books.withLock { $0.inFlight.isEmpty })
  }
}
