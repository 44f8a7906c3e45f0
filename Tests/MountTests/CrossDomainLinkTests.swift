import CPosixShim
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Hard links stay within a storage domain, renames included: a file with two names in
/// tmp cannot take one of them to Documents, or its bytes would be charged to one domain
/// and given back by the other.
@Suite("Hard links and domains", .needsFUSE, .timeLimit(.minutes(10)))
struct CrossDomainLinkTests {
  static let capacity: Int64 = 20 << 20

  @Test("a file with two links is not renamed (or exchanged) into another domain (EXDEV); the books stay right")
  func linkedFileStays() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", String(Self.capacity)])
    try Quota.writeFile(fixture.path("tmp/a"), count: 200_000)
    try Quota.writeFile(fixture.path("Documents/other"), count: 100)
    #expect(link(fixture.path("tmp/a"), fixture.path("tmp/b")) == 0)
    #expect(errnoOf(rename(fixture.path("tmp/b"), fixture.path("Documents/b"))) == EXDEV)
    #expect(
      errnoOf(
        cposix_renameat2(
          AT_FDCWD, fixture.path("Documents/other"), AT_FDCWD, fixture.path("tmp/b"), cposix_rename_exchange()))
        == EXDEV)
    // Within its domain it moves as any file does.
    #expect(rename(fixture.path("tmp/b"), fixture.path("tmp/c")) == 0)
    #expect(unlink(fixture.path("tmp/a")) == 0)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    // Down to one link, it may leave.
    #expect(rename(fixture.path("tmp/c"), fixture.path("Documents/c")) == 0)
    #expect(unlink(fixture.path("Documents/c")) == 0)
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    try fixture.unmount()
  }

  @Test("the books stay right when a linked file's names are removed in turn")
  func removeNames() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", String(Self.capacity)])
    try Quota.writeFile(fixture.path("tmp/a"), count: 200_000)
    #expect(link(fixture.path("tmp/a"), fixture.path("tmp/b")) == 0)
    // Whatever the rename answers, removing every name gives every byte back.
    _ = rename(fixture.path("tmp/b"), fixture.path("Documents/b"))
    _ = unlink(fixture.path("Documents/b"))
    _ = unlink(fixture.path("tmp/b"))
    #expect(unlink(fixture.path("tmp/a")) == 0)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    try fixture.unmount()
  }

  @Test(
    "a file back to one link is purgeable again (the pattern of link-then-unlink writers such as git)",
    arguments: ["tmp/a", "tmp/b"])
  func purgeableAgain(_ removed: String) throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", String(Self.capacity)])
    try FileManager.default.createDirectory(atPath: fixture.path("tmp/d"), withIntermediateDirectories: true)
    try Quota.writeFile(fixture.path("tmp/a"), count: 100_000)
    #expect(link(fixture.path("tmp/a"), fixture.path("tmp/b")) == 0)
    // The remaining name moves about before the other goes.
    let kept = removed == "tmp/a" ? "tmp/b" : "tmp/a"
    #expect(rename(fixture.path(kept), fixture.path("tmp/d/kept")) == 0)
    #expect(unlink(fixture.path(removed)) == 0)
    #expect(Quota.waitForReleases(fixture))
    let output = try Quota.purge(fixture.mountpoint, ["--domain", "tmp", "--all"])
    #expect(output.contains("purged 1 file"), "\(output)")
    #expect(Quota.statError(fixture.path("tmp/d/kept")) == ENOENT)
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    try fixture.unmount()
  }
}
