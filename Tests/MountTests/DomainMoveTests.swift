import CPosixShim
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A directory moves between domains with one rename, as on a device, and its subtree's
/// books move with it: usage by domain, the purge catalog, the inodes the kernel holds.
@Suite("Directories moving between domains", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct DomainMoveTests {
  static let capacity: Int64 = 64 << 20

  static func mount() throws -> MountFixture {
    try MountFixture.unlocked(["--capacity", String(capacity)])
  }

  /// A directory `d` with files, a subdirectory and a symlink.
  static func makeTree(_ fixture: MountFixture, _ path: String) throws -> [String: [UInt8]] {
    #expect(mkdir(fixture.path(path), 0o755) == 0)
    #expect(mkdir(fixture.path(path + "/sub"), 0o755) == 0)
    var contents: [String: [UInt8]] = [:]
    for (index, name) in ["a", "b", "sub/c"].enumerated() {
      contents[name] = try Quota.writeFile(
        fixture.path(path + "/" + name), count: 30_000 * (index + 1), seed: UInt64(index))
    }
    #expect(symlink("a", fixture.path(path + "/link")) == 0)
    return contents
  }

  @Test(
    "a directory moves to another domain with one rename; its usage, catalog entries and inode go with it, as a remount finds",
    arguments: [
      ("tmp/d", "Documents/d"), ("Documents/d", "Library/Caches/d"), ("Library/Caches/d", "tmp/d"),
      ("Library/Application Support/d", "Library/Preferences/d"), ("tmp/d", "Library/Caches/x/d"),
    ])
  func moves(source: String, target: String) throws {
    let fixture = try Self.mount()
    if target.hasPrefix("Library/Caches/x/") { #expect(mkdir(fixture.path("Library/Caches/x"), 0o755) == 0) }
    let contents = try Self.makeTree(fixture, source)
    let ino = try statPath(fixture.path(source)).st_ino
    try DomainBooks.expectMatch(fixture)
    #expect(rename(fixture.path(source), fixture.path(target)) == 0)
    #expect(try statPath(fixture.path(target)).st_ino == ino)
    for (name, bytes) in contents { #expect(Quota.matches(fixture.path(target + "/" + name), bytes), "\(name)") }
    #expect(try readLink(fixture.path(target + "/link")) == "a")
    #expect(Quota.statError(fixture.backingPath(source)) == ENOENT)
    #expect(Quota.waitForReleases(fixture))
    let before = try DomainBooks.expectMatch(fixture)
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    // A new daemon indexes the backing tree afresh: the same books.
    try fixture.remount()
    #expect(try DomainBooks.expectMatch(fixture) == before)
    try fixture.unmount()
  }

  @Test("moving out of tmp and Caches takes the files off the purge catalog; moving in puts each at its own last use")
  func purgeCatalogFollows() throws {
    let fixture = try Self.mount()
    _ = try Self.makeTree(fixture, "tmp/d")
    #expect(rename(fixture.path("tmp/d"), fixture.path("Documents/d")) == 0)
    #expect(try Quota.purge(fixture.mountpoint, ["--domain", "tmp", "--all"]).contains("purged 0 files"))
    #expect(Quota.exists(fixture.path("Documents/d/sub/c")))
    // A file last used long ago, moved into Caches, goes before one used now (its own
    // times place it, as the mount-time index would).
    var old = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
    #expect(utimensat(AT_FDCWD, fixture.path("Documents/d/b"), &old, AT_SYMLINK_NOFOLLOW) == 0)
    _ = try Quota.writeFile(fixture.path("Library/Caches/recent"), count: 30_000)
    #expect(rename(fixture.path("Documents/d"), fixture.path("Library/Caches/d")) == 0)
    try DomainBooks.expectMatch(fixture)
    #expect(try Quota.purge(fixture.mountpoint, ["--bytes", "1"]).contains("purged 1 file"))
    #expect(try Quota.purgedPaths(fixture.mountpoint).last == "Library/Caches/d/b")
    #expect(try Quota.purge(fixture.mountpoint, ["--domain", "caches", "--all"]).contains("purged 3 files"))
    #expect(try directoryNames(fixture.backingPath("Library/Caches/d")).sorted() == ["link", "sub"])
    try DomainBooks.expectMatch(fixture)
    try fixture.unmount()
  }

  @Test(
    "a file held open moves with its directory: writes after the move count in the new domain, and no purge takes it")
  func openFileMoves() throws {
    let fixture = try Self.mount()
    #expect(mkdir(fixture.path("Documents/d"), 0o755) == 0)
    let fd = try openFile(fixture.path("Documents/d/f"), O_RDWR | O_CREAT)
    try writeAll(fd, pattern(50_000, seed: 1))
    #expect(rename(fixture.path("Documents/d"), fixture.path("Library/Caches/d")) == 0)
    try writeAll(fd, pattern(200_000, seed: 2), at: 50_000)
    #expect(try Quota.purge(fixture.mountpoint, ["--domain", "caches", "--all"]).contains("purged 0 files"))
    #expect(rename(fixture.path("Library/Caches/d"), fixture.path("tmp/d")) == 0)
    try writeAll(fd, pattern(100_000, seed: 3), at: 250_000)
    #expect(fsync(fd) == 0)
    close(fd)
    #expect(Quota.waitForReleases(fixture))
    try DomainBooks.expectMatch(fixture)
    #expect(try Quota.purge(fixture.mountpoint, ["--domain", "tmp", "--all"]).contains("purged 1 file"))
    try DomainBooks.expectMatch(fixture)
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    try fixture.unmount()
  }

  @Test("RENAME_EXCHANGE of two directories in different domains swaps their books too")
  func exchange() throws {
    let fixture = try Self.mount()
    let documents = try Self.makeTree(fixture, "Documents/d")
    _ = try Self.makeTree(fixture, "tmp/e")
    let result = cposix_renameat2(
      AT_FDCWD, fixture.path("Documents/d"), AT_FDCWD, fixture.path("tmp/e"), cposix_rename_exchange())
    #expect(errnoOf(result) == 0)
    try DomainBooks.expectMatch(fixture)
    // What was in Documents is in tmp now, purgeable; what was in tmp is kept.
    #expect(try Quota.purge(fixture.mountpoint, ["--domain", "tmp", "--all"]).contains("purged 3 files"))
    #expect(Quota.statError(fixture.path("tmp/e/a")) == ENOENT)
    #expect(Quota.exists(fixture.path("Documents/d/sub/c")))
    #expect(documents.count == 3)
    try DomainBooks.expectMatch(fixture)
    try fixture.unmount()
  }

  @Test("RENAME_NOREPLACE across domains: EEXIST over an existing name (nothing moves), else the directory moves")
  func noReplace() throws {
    let fixture = try Self.mount()
    _ = try Self.makeTree(fixture, "tmp/d")
    #expect(mkdir(fixture.path("Documents/d"), 0o755) == 0)
    let noReplace = cposix_rename_noreplace()
    #expect(
      errnoOf(cposix_renameat2(AT_FDCWD, fixture.path("tmp/d"), AT_FDCWD, fixture.path("Documents/d"), noReplace))
        == EEXIST)
    #expect(Quota.exists(fixture.path("tmp/d/a")))
    try DomainBooks.expectMatch(fixture)
    #expect(cposix_renameat2(AT_FDCWD, fixture.path("tmp/d"), AT_FDCWD, fixture.path("Documents/e"), noReplace) == 0)
    #expect(Quota.exists(fixture.path("Documents/e/a")))
    try DomainBooks.expectMatch(fixture)
    // Plain rename over an empty directory in another domain replaces it.
    #expect(rename(fixture.path("Documents/e"), fixture.path("Documents/d")) == 0)
    #expect(mkdir(fixture.path("tmp/empty"), 0o755) == 0)
    #expect(rename(fixture.path("Documents/d"), fixture.path("tmp/empty")) == 0)
    #expect(Quota.exists(fixture.path("tmp/empty/sub/c")))
    try DomainBooks.expectMatch(fixture)
    try fixture.unmount()
  }

  @Test("a directory holding a file with a link outside it stays in its domain (EXDEV); links all inside move with it")
  func hardLinks() throws {
    let fixture = try Self.mount()
    _ = try Self.makeTree(fixture, "tmp/d")
    #expect(link(fixture.path("tmp/d/a"), fixture.path("tmp/outside")) == 0)
    #expect(errnoOf(rename(fixture.path("tmp/d"), fixture.path("Documents/d"))) == EXDEV)
    #expect(Quota.exists(fixture.backingPath("tmp/d/a")))
    #expect(Quota.statError(fixture.backingPath("Documents/d")) == ENOENT)
    #expect(unlink(fixture.path("tmp/outside")) == 0)
    #expect(link(fixture.path("tmp/d/a"), fixture.path("tmp/d/sub/a2")) == 0)
    #expect(rename(fixture.path("tmp/d"), fixture.path("Documents/d")) == 0)
    #expect(try statPath(fixture.path("Documents/d/sub/a2")).st_nlink == 2)
    #expect(Quota.waitForReleases(fixture))
    let before = try DomainBooks.expectMatch(fixture)
    try fixture.remount()
    #expect(try DomainBooks.expectMatch(fixture) == before)
    try fixture.unmount()
  }
}

/// Usage by domain and the purge catalog, checked against the backing tree.
enum DomainBooks {
  static let domains = [
    ("documents", "Documents"), ("caches", "Library/Caches"), ("tmp", "tmp"),
    ("applicationSupport", "Library/Application Support"), ("preferences", "Library/Preferences"),
  ]

  /// Each domain's usage is what `du` counts in its directory, and the purge catalog holds
  /// exactly the backing files with one link in Caches and tmp (none may be open).
  /// - Returns: the figures compared, to compare with another daemon's.
  @discardableResult
  static func expectMatch(_ fixture: MountFixture, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> [String: Int64]
  {
    let status = try Quota.status(fixture.mountpoint)
    var figures: [String: Int64] = [:]
    for (domain, path) in domains {
      let usage = Quota.number(status, "usage." + domain)
      let du = try Quota.du(fixture.backingPath(path))
      #expect(usage == du, "usage of \(domain) \(usage) != du \(du)", sourceLocation: sourceLocation)
      figures["usage." + domain] = usage
    }
    var files = 0
    for (domain, path) in domains where domain == "caches" || domain == "tmp" {
      let (count, bytes) = try singleLinkFiles(fixture.backingPath(path))
      let purgeable = Quota.number(status, "purgeable." + domain)
      #expect(purgeable == bytes, "purgeable in \(domain) \(purgeable) != \(bytes)", sourceLocation: sourceLocation)
      figures["purgeable." + domain] = purgeable
      files += count
    }
    let catalog = Quota.number(status, "purgeableFiles")
    #expect(catalog == Int64(files), "catalog \(catalog) files, backing \(files)", sourceLocation: sourceLocation)
    figures["purgeableFiles"] = catalog
    return figures
  }

  /// Regular files with one link below `path`: how many, and their allocated bytes.
  static func singleLinkFiles(_ path: String) throws -> (count: Int, bytes: Int64) {
    let result = try Command.run("find", [path, "-type", "f", "-links", "1", "-printf", "%b\\n"])
    guard result.status == 0 else { throw FixtureError("find \(path): \(result.error)") }
    let blocks = result.output.split(separator: "\n").compactMap { Int64($0) }
    return (blocks.count, blocks.reduce(0, +) * 512)
  }
}
