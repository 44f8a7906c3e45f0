import CPosixShim
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Extended attributes take space: on ext4, values that do not fit in the inode get a
/// block of their own, which `du` counts and so must the quota.
@Suite("Quota accounting of extended attributes", .needsFUSE, .timeLimit(.minutes(10)))
struct XattrQuotaTests {
  static let capacity: Int64 = 20 << 20

  @Test(
    "an attribute that needs a block is charged when set and given back when removed",
    arguments: ["Documents/file", "Documents/directory", "Library/Caches/file"])
  func attributeBlock(_ relative: String) throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", String(Self.capacity)])
    let path = fixture.path(relative)
    if relative.hasSuffix("directory") {
      try #require(mkdir(path, 0o755) == 0)
    } else {
      try writeFile(path, pattern(5000, seed: 1))
    }
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    let before = try Quota.du(fixture.backing)

    // Too big for the inode's own space: ext4 gives it a block.
    #expect(setXattr(path, "user.big", Array(repeating: UInt8(ascii: "x"), count: 600)) == 0)
    #expect(setXattr(path, "com.apple.metadata:com_apple_backup_excludeItem", pattern(61, seed: 2)) == 0)
    #expect(try Quota.du(fixture.backing) > before, "the backing filesystem allocated a block for the attributes")
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    // A write measures the file again, attribute block included; the removal must give
    // the block back.
    if !relative.hasSuffix("directory") {
      let fd = try openFile(path, O_WRONLY | O_APPEND)
      try writeAll(fd, [1])
      close(fd)
      #expect(Quota.waitForReleases(fixture))
    }
    #expect(cposix_removexattr(path, "user.big") == 0)
    #expect(cposix_removexattr(path, "com.apple.metadata:com_apple_backup_excludeItem") == 0)
    try Quota.expectBooksMatch(fixture, capacity: Self.capacity)
    try fixture.unmount()
  }
}
