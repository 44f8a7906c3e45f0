import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Purging on request (`appbox purge`) and in the background (water marks, tmp's age limit).
@Suite("Explicit and background purging", .needsFUSE, .timeLimit(.minutes(10)))
struct PurgeCommandTests {
  let mib = Quota.mebibyte

  /// Writes Caches files c0…c(n-1) of 1 MiB, then uses them in `order` (oldest first).
  func fillCaches(_ fixture: MountFixture, count: Int, order: [Int]) throws {
    for index in 0..<count {
      try Quota.writeFile(fixture.path("Library/Caches/c\(index)"), count: mib, seed: UInt64(index + 1))
    }
    #expect(Quota.waitForReleases(fixture))
    for index in order { try Quota.use(fixture.path("Library/Caches/c\(index)")) }
    #expect(Quota.waitForReleases(fixture))
  }

  @Test("--bytes frees at least that much, least recently used first, tmp before Caches")
  func purgeBytes() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    try Quota.writeFile(fixture.path("tmp/t"), count: mib / 4, seed: 50)
    try fillCaches(fixture, count: 4, order: [3, 1, 0, 2])
    let output = try Quota.purge(fixture.mountpoint, ["--bytes", "1280K"])
    // 256 KiB of tmp, then 1 MiB of c3 makes 1.25 MiB: exactly enough.
    #expect(output.contains("purged 2 files"), "\(output)")
    // The event log is in purge order: tmp before Caches.
    let paths = try Quota.purgedPaths(fixture.mountpoint)
    #expect(paths == ["tmp/t", "Library/Caches/c3"])
    #expect(try Quota.events(fixture.mountpoint).allSatisfy { $0["reason"] as? String == "explicit" })
    let more = try Quota.purge(fixture.mountpoint, ["--bytes", "1025K"])
    #expect(more.contains("purged 2 files"), "\(more)")
    #expect(try Quota.purgedPaths(fixture.mountpoint).suffix(2) == ["Library/Caches/c1", "Library/Caches/c0"])
    #expect(Quota.statError(fixture.path("Library/Caches/c1")) == ENOENT)
    #expect(Quota.matches(fixture.path("Library/Caches/c2"), pattern(mib, seed: 3)))
    try Quota.expectBooksMatch(fixture, capacity: 20 << 20)
    try fixture.unmount()
  }

  @Test("--domain tmp --all empties tmp only; --domain caches --all empties Caches, subdirectories included")
  func purgeDomain() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    try FileManager.default.createDirectory(atPath: fixture.path("tmp/d/e"), withIntermediateDirectories: true)
    try FileManager.default.createDirectory(
      atPath: fixture.path("Library/Caches/sub"), withIntermediateDirectories: true)
    for name in ["tmp/a", "tmp/d/b", "tmp/d/e/c"] { try Quota.writeFile(fixture.path(name), count: 100_000) }
    for name in ["Library/Caches/x", "Library/Caches/sub/y"] { try Quota.writeFile(fixture.path(name), count: 200_000) }
    try Quota.writeFile(fixture.path("Documents/keep"), count: 300_000)
    #expect(Quota.waitForReleases(fixture))

    let output = try Quota.purge(fixture.mountpoint, ["--domain", "tmp", "--all"])
    #expect(output.contains("purged 3 files"), "\(output)")
    for name in ["tmp/a", "tmp/d/b", "tmp/d/e/c"] { #expect(Quota.statError(fixture.path(name)) == ENOENT, "\(name)") }
    #expect(Quota.exists(fixture.path("Library/Caches/x")))
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "purgeable.tmp") == 0)
    try Quota.expectBooksMatch(fixture, capacity: 20 << 20)

    let caches = try Quota.purge(fixture.mountpoint, ["--domain", "caches", "--all"])
    #expect(caches.contains("purged 2 files"), "\(caches)")
    #expect(Quota.statError(fixture.path("Library/Caches/sub/y")) == ENOENT)
    #expect(Quota.matches(fixture.path("Documents/keep"), pattern(300_000, seed: 1)))
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "purgeableFiles") == 0)
    #expect(Quota.number(status, "purges") == 5)
    try Quota.expectBooksMatch(fixture, capacity: 20 << 20)
    try fixture.unmount()
  }

  @Test("--older-than purges what aged, keeps what was just used")
  func purgeOlderThan() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    try Quota.writeFile(fixture.path("Library/Caches/old"), count: 64 << 10)
    try Quota.writeFile(fixture.path("tmp/old"), count: 64 << 10)
    #expect(Quota.waitForReleases(fixture))
    let aged = Date().addingTimeInterval(4.2)
    #expect(Quota.poll { Date() >= aged })  // the files age; the LRU clock counts seconds
    try Quota.writeFile(fixture.path("Library/Caches/new"), count: 64 << 10)
    try Quota.writeFile(fixture.path("tmp/new"), count: 64 << 10)
    #expect(Quota.waitForReleases(fixture))

    // 3 s: files written just now stay young even on a slow, loaded machine.
    let cachesOnly = try Quota.purge(fixture.mountpoint, ["--older-than", "3s", "--domain", "caches"])
    #expect(cachesOnly.contains("purged 1 file,"), "\(cachesOnly)")
    #expect(try Quota.purgedPaths(fixture.mountpoint, reason: "age") == ["Library/Caches/old"])
    #expect(Quota.exists(fixture.path("tmp/old")))
    let both = try Quota.purge(fixture.mountpoint, ["--older-than", "3s"])
    #expect(both.contains("purged 1 file,"), "\(both)")
    #expect(try Quota.purgedPaths(fixture.mountpoint, reason: "age") == ["Library/Caches/old", "tmp/old"])
    for name in ["Library/Caches/new", "tmp/new"] { #expect(Quota.exists(fixture.path(name)), "\(name)") }
    try Quota.expectBooksMatch(fixture, capacity: 20 << 20)
    try fixture.unmount()
  }

  @Test("above --purge-at the daemon purges down to --purge-to by itself")
  func waterMarks() throws {
    let capacity: Int64 = 10 << 20
    // Found by the scan at mount, above the high mark from the start: 1 MiB in Documents,
    // seven 1 MiB cache files whose last use (max of atime, mtime) is c0 oldest … c6 newest.
    let fixture = try MountFixture(arguments: [
      "--unlocked", "--capacity", "10M", "--purge-at", "50%", "--purge-to", "30%",
    ]) {
      backing in
      for directory in ["Documents", "Library/Caches"] {
        try FileManager.default.createDirectory(atPath: backing + "/" + directory, withIntermediateDirectories: true)
      }
      try Data(pattern(Quota.mebibyte, seed: 1)).write(to: URL(fileURLWithPath: backing + "/Documents/doc"))
      let now = time(nil)
      for index in 0..<7 {
        let path = backing + "/Library/Caches/c\(index)"
        try Data(pattern(Quota.mebibyte, seed: UInt64(index))).write(to: URL(fileURLWithPath: path))
        var times = [
          timeval(tv_sec: now - 1000 + index * 10, tv_usec: 0), timeval(tv_sec: now - 1000 + index * 10, tv_usec: 0),
        ]
        #expect(utimes(path, &times) == 0)
      }
    }
    let low = capacity * 30 / 100
    let reached = try Quota.poll(seconds: 10) { Quota.number(try Quota.status(fixture.mountpoint), "used") <= low }
    let used = Quota.number(try Quota.status(fixture.mountpoint), "used")
    #expect(reached, "used \(used) > \(low)")
    #expect(used > low - Int64(mib) - 4096, "purges only down to the low mark: used \(used)")
    let purged = try Quota.purgedPaths(fixture.mountpoint, reason: "watermark")
    #expect(purged == (0..<purged.count).map { "Library/Caches/c\($0)" }, "least recently used first: \(purged)")
    #expect(Quota.exists(fixture.path("Library/Caches/c6")))
    #expect(Quota.matches(fixture.path("Documents/doc"), pattern(mib, seed: 1)))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    try fixture.unmount()
  }

  @Test("--tmp-max-age 1s purges unused tmp files and nothing in Caches")
  func tmpMaxAge() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M", "--tmp-max-age", "1s"])
    try Quota.writeFile(fixture.path("tmp/scratch"), count: 100_000)
    try Quota.writeFile(fixture.path("Library/Caches/keep"), count: 100_000)
    #expect(Quota.waitForReleases(fixture))
    #expect(Quota.poll(seconds: 10) { Quota.statError(fixture.path("tmp/scratch")) == ENOENT })
    #expect(try Quota.purgedPaths(fixture.mountpoint, reason: "age") == ["tmp/scratch"])
    #expect(Quota.exists(fixture.path("Library/Caches/keep")))
    // A tmp file held open is never purged, however old.
    try Quota.writeFile(fixture.path("tmp/held"), count: 10_000)
    let fd = open(fixture.path("tmp/held"), O_RDONLY | O_CLOEXEC)
    #expect(fd >= 0)
    let aged = Date().addingTimeInterval(3.5)
    #expect(Quota.poll { Date() >= aged })
    #expect(Quota.exists(fixture.path("tmp/held")))
    close(fd)
    #expect(Quota.poll(seconds: 10) { Quota.statError(fixture.path("tmp/held")) == ENOENT })
    try Quota.expectBooksMatch(fixture, capacity: 20 << 20)
    try fixture.unmount()
  }
}
