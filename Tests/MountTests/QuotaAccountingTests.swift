import Foundation
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The books against what `du` counts where only a kernel shows it: metadata the backing
/// filesystem allocates at writeback, after the kernel dropped the file's pages.
/// (Everyday operations' books are tested below the mount: AppBoxFSTests' QuotaBooksTests.)
@Suite("Quota accounting", .needsFUSE, .timeLimit(.minutes(10)))
struct QuotaAccountingTests {
  let capacity: Int64 = 20 << 20

  @Test("metadata the backing filesystem allocates at writeback is counted: 1 GiB, fsync, pages dropped, remount, rm")
  func writebackMetadata() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "4G"])
    let path = fixture.path("Documents/seq.dat")
    for _ in 0..<2 {
      try Command.shell("rm -f '\(path)'; dd if=/dev/zero of='\(path)' bs=1M count=1024 conv=fsync status=none")
      try Quota.expectBooksMatch(fixture, capacity: 4 << 30)
      // The backing file's cached pages are dropped, and the kernel forgets the inode (a
      // remount: its forget measures the file, and the new daemon measures it afresh),
      // without /proc/sys/vm/drop_caches, which a container cannot write.
      try Quota.dropCachedPages(fixture.backingPath("Documents/seq.dat"))
      try fixture.remount()
      try Command.shell("cat '\(path)' > /dev/null")
      try Quota.expectBooksMatch(fixture, capacity: 4 << 30)
    }
    #expect(unlink(path) == 0)
    try Quota.expectBooksMatch(fixture, capacity: 4 << 30)
    try fixture.unmount()
  }
}
