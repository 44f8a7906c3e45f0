import CPosixShim
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `O_DIRECT` on the mount: unaligned buffers and offsets work (the backing file is not
/// opened with `O_DIRECT`), also when the file is already open by passthrough.
@Suite("O_DIRECT opens", .needsFUSE, .timeLimit(.minutes(10)))
struct UnalignedDirectIOTests {
  @Test("an O_DIRECT handle reads and writes at unaligned offsets")
  func unaligned() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/direct")
    try writeFile(path, pattern(10_000, seed: 1))
    let fd = try openFile(path, O_RDWR | cposix_o_direct())
    try writeAll(fd, pattern(100, seed: 2), at: 3)
    #expect(try readAt(fd, count: 100, offset: 3) == pattern(100, seed: 2))
    close(fd)
    try fixture.unmount()
  }

  @Test("an O_DIRECT open of a file held open by passthrough still takes unaligned I/O, through the daemon")
  func joinsPassthrough() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Library/Caches/shared")
    try writeFile(path, pattern(10_000, seed: 1))
    #expect(Quota.waitForReleases(fixture))
    let reader = try openFile(path, O_RDONLY)  // class C, UNLOCKED: passthrough where available
    let direct = try openFile(path, O_RDWR | cposix_o_direct())
    // The kernel hands a passthrough handle's I/O to the backing file with the caller's
    // O_DIRECT, which ext4 refuses unaligned (EINVAL); the daemon must serve this one.
    #expect(try readAt(direct, count: 100, offset: 3) == Array(pattern(10_000, seed: 1)[3..<103]))
    try writeAll(direct, pattern(100, seed: 2), at: 3)
    #expect(try readAt(reader, count: 100, offset: 3) == pattern(100, seed: 2), "the reader sees the write")
    close(direct)
    close(reader)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: 4 << 30)
    try fixture.unmount()
  }
}
