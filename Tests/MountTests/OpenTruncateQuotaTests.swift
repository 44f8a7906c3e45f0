import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// An `O_TRUNC` open frees the file's blocks at once (the kernel passes the flag with the
/// open, so no separate truncate reaches the daemon): the books must follow then, not at
/// some later write.
@Suite("Quota accounting of O_TRUNC opens", .needsFUSE, .timeLimit(.minutes(10)))
struct OpenTruncateQuotaTests {
  static let capacity: Int64 = 20 << 20

  @Test(
    "an O_TRUNC open gives the file's bytes back while it is open and after its close",
    arguments: [
      "Documents/file", "Library/Caches/file",
    ])
  func openTruncate(_ relative: String) throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", String(Self.capacity)])
    let path = fixture.path(relative)
    try Quota.writeFile(path, count: 1 << 20)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    let fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
    try #require(fd >= 0)
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    close(fd)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    // And through creat(2)'s flags on the existing name.
    try Quota.writeFile(path, count: 1 << 20)
    #expect(Quota.waitForReleases(fixture))
    let again = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    try #require(again >= 0)
    close(again)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    try fixture.unmount()
  }
}
