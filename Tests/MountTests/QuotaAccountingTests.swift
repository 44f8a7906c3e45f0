import Foundation
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The books (status `used`, statfs, the root's capacity attributes) against what `du`
/// counts in the backing tree, through everyday namespace operations.
@Suite("Quota accounting", .needsFUSE, .timeLimit(.minutes(10)))
struct QuotaAccountingTests {
  let capacity: Int64 = 20 << 20

  func rootAttribute(_ fixture: MountFixture, _ name: String) -> Int64? {
    let fd = open(fixture.mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    guard let value = try? Xattr.value(fd, name: name) else { return nil }
    let text = String(decoding: value.filter { $0 != 0 }, as: UTF8.self)
    return Int64(text.trimmingCharacters(in: CharacterSet.whitespacesAndNewlines))
  }

  @Test("fresh mount, writes, truncates, unlinks, renames across domains: used == du throughout")
  func everydayOperations() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"]) { backing in
      try FileManager.default.createDirectory(atPath: backing + "/Documents/old", withIntermediateDirectories: true)
      try Data(Quota.pattern(300_000, seed: 3)).write(to: URL(fileURLWithPath: backing + "/Documents/old/x"))
    }
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    try Quota.writeFile(fixture.path("Documents/a"), count: 1_000_000)
    try Quota.writeFile(fixture.path("Library/Caches/b"), count: 500_000)
    try Quota.writeFile(fixture.path("tmp/c"), count: 200_001)
    #expect(truncate(fixture.path("Documents/a"), 10_000) == 0)
    #expect(rename(fixture.path("tmp/c"), fixture.path("Documents/c")) == 0)
    #expect(rename(fixture.path("Documents/old/x"), fixture.path("Library/Caches/x")) == 0)
    #expect(unlink(fixture.path("Library/Caches/b")) == 0)
    #expect(mkdir(fixture.path("Library/Preferences/p"), 0o755) == 0)
    #expect(symlink("../Documents/a", fixture.path("tmp/link")) == 0)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "purgeable.caches") == (try Quota.du(fixture.backingPath("Library/Caches/x"))))
    #expect(Quota.number(status, "purgeable.tmp") == 0)
    let free = Quota.number(status, "free")
    #expect(rootAttribute(fixture, "user.appbox.capacity") == capacity)
    #expect(
      rootAttribute(fixture, "user.appbox.available-important") == free + Quota.number(status, "purgeable.caches"))
    #expect(rootAttribute(fixture, "user.appbox.available-opportunistic") == free)
    #expect((try? Xattr.set(path: fixture.mountpoint, name: "user.appbox.capacity", value: [49])) == nil, "read-only")
    try fixture.unmount()
  }

  @Test("every fallocate mode, on preallocated, written and punched blocks: used == du after each call")
  func fallocateModes() throws {
    let fixture = try MountFixture.unlocked(["--capacity", "20M"])
    let path = fixture.path("Documents/f")
    let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    try #require(fd >= 0)
    let keepSize = LinuxConstants.FALLOC_FL_KEEP_SIZE
    let punch = LinuxConstants.FALLOC_FL_PUNCH_HOLE | keepSize
    let zero: Int32 = 0x10
    let calls: [(String, () -> Int32)] = [
      ("preallocate 1 MiB", { Libc.fallocate(fd, 0, 0, 1 << 20) }),
      ("write 100 KiB into it", { pwrite(fd, pattern(100_000, seed: 7), 100_000, 300_000) == 100_000 ? 0 : -1 }),
      ("punch 4 KiB of preallocated blocks", { Libc.fallocate(fd, punch, 8192, 4096) }),
      ("punch across written blocks", { Libc.fallocate(fd, punch, 290_816, 65_536) }),
      ("preallocate past the end, size kept", { Libc.fallocate(fd, keepSize, 1 << 20, 512 << 10) }),
      ("zero a range over a hole", { Libc.fallocate(fd, zero, 4096, 16_384) }),
      ("zero a range over written blocks and past the end", { Libc.fallocate(fd, zero, 393_216, 2 << 20) }),
      ("punch the whole file", { Libc.fallocate(fd, punch, 0, 4 << 20) }),
    ]
    for (name, call) in calls {
      #expect(call() == 0, "\(name): \(String(cString: strerror(errno)))")
      try Quota.expectBooksMatch(fixture, capacity: capacity)
    }
    // Collapse and insert range: the kernel's FUSE client passes neither to a daemon.
    #expect(Libc.fallocate(fd, 0x08, 65_536, 65_536) == -1 && errno == EOPNOTSUPP)
    close(fd)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    try fixture.unmount()
  }

  @Test("a directory that grows with many entries is counted as du counts it")
  func directoryGrowth() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    for domain in ["Documents/many", "Library/Caches/many"] {
      #expect(mkdir(fixture.path(domain), 0o755) == 0)
      for index in 0..<400 {
        let name = fixture.path(domain + "/" + String(repeating: "n", count: 60) + String(index))
        let fd = open(name, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        #expect(fd >= 0)
        close(fd)
      }
    }
    #expect(Quota.waitForReleases(fixture))
    let directoryBytes = try Quota.du(fixture.backingPath("Documents/many"))
    #expect(directoryBytes > 4096, "the backing directory grew (\(directoryBytes))")
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    try fixture.unmount()
  }

  @Test("a hard-linked cache file: a purge leaves the books equal to du")
  func hardLinkedCacheFile() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    try Quota.writeFile(fixture.path("Library/Caches/a"), count: 1 << 20)
    #expect(link(fixture.path("Library/Caches/a"), fixture.path("Library/Caches/b")) == 0)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    try Quota.purge(fixture.mountpoint, ["--domain", "caches", "--all"])
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    // Whatever remains in the backing is still readable through the mount.
    for name in ["a", "b"] where Quota.exists(fixture.backingPath("Library/Caches/" + name)) {
      #expect(Quota.openError(fixture.path("Library/Caches/" + name)) == 0, "\(name) listed but not openable")
      let intact = Quota.matches(fixture.path("Library/Caches/" + name), Quota.pattern(1 << 20, seed: 1))
      #expect(intact, "\(name) is still in the backing but its content is not readable through the mount")
    }
    try fixture.unmount()
  }

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
