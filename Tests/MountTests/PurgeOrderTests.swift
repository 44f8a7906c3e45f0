import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Purging on the write path: what goes, in which order, and what never goes.
@Suite("Purge order under pressure", .needsFUSE, .timeLimit(.minutes(10)))
struct PurgeOrderTests {
  let capacity: Int64 = 8 << 20
  let mib = Quota.mebibyte

  @Test("tmp goes first, then the least recently used cache files, in order; the write succeeds")
  func tmpThenLeastRecentlyUsed() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "8M"])
    let caches = ["c0", "c1", "c2", "c3", "c4"]
    for (index, name) in caches.enumerated() {
      try Quota.writeFile(fixture.path("Library/Caches/" + name), count: mib, seed: UInt64(index + 1))
    }
    try Quota.writeFile(fixture.path("tmp/t"), count: mib / 2, seed: 99)
    #expect(Quota.waitForReleases(fixture))
    // Use order (oldest first): c2 c0 c4 c1 c3; tmp used last of all, yet purged first.
    for name in ["c2", "c0", "c4", "c1", "c3"] { try Quota.use(fixture.path("Library/Caches/" + name)) }
    try Quota.use(fixture.path("tmp/t"))
    #expect(Quota.waitForReleases(fixture))

    let before = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(before, "purgeable.caches") == Int64(5 * mib))
    #expect(Quota.number(before, "purgeable.tmp") == Int64(mib / 2))
    #expect(Quota.number(before, "purgeableFiles") == 6)
    let free = Int(Quota.number(before, "free"))
    // Needs tmp and one and a half cache files beyond what is free: three files must go.
    let size = (free + mib / 2 + mib + mib / 2) / 4096 * 4096
    let written = try Quota.writeFile(fixture.path("Documents/big"), count: size, seed: 7)
    #expect(Quota.matches(fixture.path("Documents/big"), written))

    let paths = try Quota.purgedPaths(fixture.mountpoint)
    #expect(paths == ["tmp/t", "Library/Caches/c2", "Library/Caches/c0"])
    #expect(try Quota.events(fixture.mountpoint).allSatisfy { $0["reason"] as? String == "pressure" })
    for gone in ["tmp/t", "Library/Caches/c2", "Library/Caches/c0"] {
      #expect(Quota.poll { Quota.statError(fixture.path(gone)) == ENOENT }, "\(gone)")  // told right after the write
      #expect(!Quota.exists(fixture.backingPath(gone)), "\(gone)")
    }
    for (index, name) in caches.enumerated() where ["c4", "c1", "c3"].contains(name) {
      #expect(Quota.matches(fixture.path("Library/Caches/" + name), Quota.pattern(mib, seed: UInt64(index + 1))))
    }
    let after = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(after, "purges") == 3)
    #expect(Quota.number(after, "bytesPurged") == Int64(2 * mib + mib / 2))
    #expect(Quota.number(after, "purgeableFiles") == 3)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    try fixture.unmount()
  }

  @Test("urgency high, medium, low before none, whatever the use order")
  func urgencyBeforeRecency() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "8M"])
    let files = ["none", "low", "medium", "high"]
    for (index, name) in files.enumerated() {
      try Quota.writeFile(fixture.path("Library/Caches/" + name), count: mib, seed: UInt64(index + 1))
      if name != "none" { try Quota.setUrgency(fixture.path("Library/Caches/" + name), name) }
    }
    #expect(Quota.waitForReleases(fixture))
    // Least recently used first: none, low, medium, high — the reverse of urgency.
    for name in files { try Quota.use(fixture.path("Library/Caches/" + name)) }
    #expect(Quota.waitForReleases(fixture))
    let free = Int(Quota.number(try Quota.status(fixture.mountpoint), "free"))
    let size = (free + 2 * mib + mib / 2) / 4096 * 4096
    try Quota.writeFile(fixture.path("Documents/big"), count: size, seed: 7)
    #expect(
      try Quota.purgedPaths(fixture.mountpoint) == [
        "Library/Caches/high", "Library/Caches/medium", "Library/Caches/low",
      ])
    #expect(Quota.exists(fixture.path("Library/Caches/none")))
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    try fixture.unmount()
  }

  @Test("an open cache file survives, a closed one goes; then ENOSPC with a partial write; Documents untouched")
  func openFileSurvivesThenNoSpace() throws {
    var documents: [String: [UInt8]] = [:]
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "8M"]) { backing in
      try FileManager.default.createDirectory(atPath: backing + "/Documents/sub", withIntermediateDirectories: true)
      for (index, name) in ["a.bin", "sub/b.bin", "c.txt"].enumerated() {
        let bytes = Quota.pattern(index == 2 ? 100 : mib / 2 + 123 * index, seed: UInt64(40 + index))
        try Data(bytes).write(to: URL(fileURLWithPath: backing + "/Documents/" + name))
        documents[name] = bytes
      }
    }
    try Quota.writeFile(fixture.path("Library/Caches/held"), count: mib, seed: 1)
    try Quota.writeFile(fixture.path("Library/Caches/closed"), count: mib, seed: 2)
    #expect(Quota.waitForReleases(fixture))
    try Quota.use(fixture.path("Library/Caches/closed"))
    // "held" is the least recently used, but it is open.
    var held = open(fixture.path("Library/Caches/held"), O_RDONLY | O_CLOEXEC)
    #expect(held >= 0)
    defer { if held >= 0 { close(held) } }

    let free = Int(Quota.number(try Quota.status(fixture.mountpoint), "free"))
    let asked = free + 4 * mib
    let bytes = Quota.pattern(asked, seed: 5)
    let fd = open(fixture.path("Documents/huge"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    #expect(fd >= 0)
    let first = bytes.withUnsafeBufferPointer { write(fd, $0.baseAddress!, asked) }
    #expect(first > 0 && first < asked, "first write returned \(first) of \(asked)")
    // Roughly what was free plus the closed cache file, within a few blocks of slack.
    #expect(abs(first - (free + mib)) <= 4 * 4096, "wrote \(first), free \(free) + 1 MiB")
    let second = bytes.withUnsafeBufferPointer { write(fd, $0.baseAddress! + max(first, 0), asked - max(first, 0)) }
    let secondErrno = errno
    #expect(second == -1 && secondErrno == ENOSPC, "second write returned \(second), errno \(secondErrno)")
    close(fd)
    #expect(Quota.matches(fixture.path("Documents/huge"), Array(bytes.prefix(max(first, 0)))))

    #expect(try Quota.purgedPaths(fixture.mountpoint) == ["Library/Caches/closed"])
    #expect(Quota.exists(fixture.path("Library/Caches/held")))
    var buffer = [UInt8](repeating: 0, count: mib)
    #expect(pread(held, &buffer, mib, 0) == mib)
    #expect(buffer == Quota.pattern(mib, seed: 1))
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "noSpaceRefusals") >= 1)
    #expect(Quota.number(status, "purgeable.caches") == 0, "an open file is not purgeable")

    // Nothing is left but the slack of a block or two.
    #expect(Quota.number(status, "free") <= 2 * 4096, "free after ENOSPC: \(Quota.number(status, "free"))")

    for (name, expected) in documents {
      #expect(Quota.matches(fixture.path("Documents/" + name), expected), "\(name) through the mount")
      #expect(Quota.matches(fixture.backingPath("Documents/" + name), expected), "\(name) in the backing")
    }
    close(held)
    held = -1
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    try fixture.unmount()
  }
}
