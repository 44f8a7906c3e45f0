import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// What a purge costs the app: purged names looked up and missed, or created again; the
/// Caches files' hits; resizes, and the usage samples experiments read.
@Suite("Purge cost, resizes and usage samples through the protocol")
struct PurgeCostTests {
  /// The `purgeCost` object of the status.
  static func cost(_ box: Sandbox) -> [String: Any] { box.status["purgeCost"] as? [String: Any] ?? [:] }

  @Test("looking up a purged name is one missed event per purge; an atomic rename onto it re-creates it")
  func missedAndRenamed() throws {
    let box = try Sandbox(capacity: 20 << 20)
    for index in 0..<4 { try box.writeFile("Library/Caches/c\(index)", pattern(mib, seed: UInt64(index))) }
    // Shrinking purges c0 and c1 (least recently used first).
    let resized = box.fs.resize(to: 3 << 20, reason: .resize)
    #expect(resized.files >= 2)
    let purged = box.purgedPaths(reason: "shrink")
    try #require(purged.first == "Library/Caches/c0", "\(purged)")
    for _ in 0..<3 { #expect(throws: Errno.noEntry) { try box.lookup("Library/Caches/c0") } }
    let missed = box.eventObjects("missed")
    #expect(missed.map { $0["path"] as? String } == ["Library/Caches/c0"], "one event per purge")
    #expect(TestFiles.number(Self.cost(box), "missed") == 1)
    #expect(TestFiles.number(missed[0], "purgedBytes") == TestFiles.number(box.eventObjects("purge")[0], "bytes"))

    // Written aside and renamed into place, as Foundation's atomic writes do.
    _ = box.fs.resize(to: 20 << 20, reason: .resize)
    try box.writeFile("Library/Caches/.c0.partial", bytes("fresh\n"))
    try box.rename("Library/Caches/.c0.partial", to: "Library/Caches/c0")
    #expect(box.eventObjects("recreated").map { $0["path"] as? String } == ["Library/Caches/c0"])
    #expect(TestFiles.number(Self.cost(box), "recreated") == 1)
    #expect(TestFiles.number(Self.cost(box), "bytesWrittenAgain") == 4096, "one block, renamed into place")
  }

  @Test("a re-created purged cache file: a missed lookup, then a re-creation with the purged bytes, then what it holds")
  func recreated() throws {
    let box = try Sandbox(capacity: 20 << 20)
    try box.writeFile("Library/Caches/img1", pattern(mib))
    try box.writeFile("Library/Caches/img2", pattern(mib / 2))
    try box.writeFile("tmp/scratch", pattern(4096))
    #expect(box.eventObjects("recreated").isEmpty)
    _ = box.fs.purge(.domain(.caches))
    let bytes = try #require(
      box.eventObjects("purge").first { $0["path"] as? String == "Library/Caches/img1" }.map {
        TestFiles.number($0, "bytes")
      })
    // What an app does with a cache entry: use it if it is there, else fetch it again.
    #expect(throws: Errno.noEntry) { try box.lookup("Library/Caches/img1") }
    let file = try box.create("Library/Caches/img1", flags: O_WRONLY | O_TRUNC)
    #expect(try box.write(file, pattern(300_000)) == 300_000)
    #expect(TestFiles.number(Self.cost(box), "bytesWrittenAgain") == 0, "counted at the last close")
    box.release(file)
    #expect(box.eventObjects("missed").map { $0["path"] as? String } == ["Library/Caches/img1"])
    let recreated = box.eventObjects("recreated")
    try #require(recreated.count == 1)
    #expect(recreated[0]["path"] as? String == "Library/Caches/img1")
    #expect(TestFiles.number(recreated[0], "purgedBytes") == bytes)
    let since = TestFiles.double(recreated[0], "secondsSincePurge")
    #expect(since >= 0 && since < 60)
    let counters = Self.cost(box)
    #expect(TestFiles.number(counters, "recreated") == 1)
    #expect(TestFiles.number(counters, "recreatedBytes") == bytes)
    #expect(TestFiles.number(counters, "missed") == 1)
    #expect(
      TestFiles.number(counters, "bytesWrittenAgain") == Int64(try box.backingStat("Library/Caches/img1").st_blocks)
        * 512)

    // Created again, the name is forgotten: its next removal and re-creation cost nothing.
    try box.unlink("Library/Caches/img1")
    try box.writeFile("Library/Caches/img1", pattern(4096))
    // Not purged, not counted: a new name, a tmp file that was never purged, a miss.
    try box.writeFile("Library/Caches/new", pattern(4096))
    try box.writeFile("tmp/other", pattern(4096))
    #expect(throws: Errno.noEntry) { try box.lookup("Library/Caches/never") }
    let after = Self.cost(box)
    #expect(TestFiles.number(after, "recreated") == 1 && TestFiles.number(after, "missed") == 1)
  }

  @Test("a purged name re-created by mknod counts at once (no handle of its own to close)")
  func recreatedByMknod() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/lock", pattern(4096))
    _ = box.fs.purge(.domain(.tmp))
    try box.mknod("tmp/lock", mode: S_IFREG | 0o644)
    #expect(TestFiles.number(Self.cost(box), "recreated") == 1)
    #expect(box.eventObjects("missed").isEmpty, "no lookup came first")
  }

  @Test("a miss or a new name outside Caches and tmp costs nothing, even where a purged name was")
  func onlyPurgeableDomains() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/f", pattern(4096))
    _ = box.fs.purge(.domain(.tmp))
    #expect(throws: Errno.noEntry) { try box.lookup("Documents/f") }
    try box.writeFile("Documents/f", [1])
    #expect(TestFiles.number(Self.cost(box), "missed") == 0)
    #expect(TestFiles.number(Self.cost(box), "recreated") == 0)
  }

  @Test("the purged names remembered are bounded: the oldest are forgotten first")
  func rememberedIsBounded() throws {
    let box = try Sandbox(prepare: { backing in
      try Sys.mkdir(backing + "/tmp", 0o755)
      for index in 0..<4200 { try TestFiles.write(backing + "/tmp/f\(index)", []) }
    })
    #expect(box.fs.purge(.domain(.tmp)).files == 4200)
    let counters = Self.cost(box)
    #expect(TestFiles.number(counters, "remembered") == Int64(PurgedNames.defaultLimit))
    #expect(TestFiles.number(counters, "rememberedLimit") == Int64(PurgedNames.defaultLimit))
  }

  @Test(
    "read-only opens of Caches files are hits; writers' opens and tmp files are not; reads through the daemon count")
  func cacheHits() throws {
    let box = try Sandbox()
    try box.writeFile("Library/Caches/hit", pattern(256 << 10))
    try box.writeFile("tmp/not-a-cache", pattern(4096))
    let before = Self.cost(box)
    for _ in 0..<3 { try box.use("Library/Caches/hit") }
    try box.use("tmp/not-a-cache")
    box.release(try box.open("Library/Caches/hit", flags: O_WRONLY))  // storing is not a hit
    let after = Self.cost(box)
    #expect(TestFiles.number(after, "cacheOpens") - TestFiles.number(before, "cacheOpens") == 3)
    #expect(TestFiles.number(after, "cacheReads") - TestFiles.number(before, "cacheReads") == 3)
  }

  @Test(
    "shrinking purges tmp, then Caches least recently used first, down to the new capacity; then ENOSPC; growing lets writes through"
  )
  func shrinkThenGrow() throws {
    let box = try Sandbox(capacity: 20 << 20)
    try box.writeFile("Documents/doc", pattern(4 * mib, seed: 99))
    for index in 0..<2 { try box.writeFile("tmp/t\(index)", pattern(mib, seed: UInt64(10 + index))) }
    for index in 0..<6 { try box.writeFile("Library/Caches/c\(index)", pattern(mib, seed: UInt64(20 + index))) }
    try box.writeFile("tmp/held", pattern(mib, seed: 30))
    try box.writeFile("Library/Caches/held", pattern(mib, seed: 31))
    for index in 0..<6 { try box.use("Library/Caches/c\(index)") }
    let held = try ["tmp/held", "Library/Caches/held"].map { try box.open($0) }
    #expect(box.used > 12 * Int64(mib))

    let capacity: Int64 = 9 << 20
    let shrink = box.fs.resize(to: capacity, reason: .resize)
    #expect(shrink.from == 20 << 20 && shrink.to == capacity)
    #expect(shrink.used <= capacity && box.used == shrink.used)
    #expect(try QuotaBooksTests.rootNumber(box, .capacity) == capacity)
    let purged = box.purgedPaths(reason: "shrink")
    try #require(purged.count >= 3, "\(purged)")
    #expect(shrink.files == purged.count)
    #expect(Array(purged.prefix(2)) == ["tmp/t0", "tmp/t1"])
    #expect(Array(purged.dropFirst(2)) == (0..<(purged.count - 2)).map { "Library/Caches/c\($0)" })
    #expect(box.backingHas("Library/Caches/c5"), "purged no further than needed")
    #expect(try box.read(held[0], count: mib) == pattern(mib, seed: 30), "open files survive")
    let changes = box.eventObjects("capacity")
    #expect(changes.count == 1)
    #expect(TestFiles.number(changes[0], "from") == 20 << 20 && TestFiles.number(changes[0], "to") == capacity)
    #expect(changes.first?["reason"] as? String == "resize")
    try box.expectExactBooks()

    // A write that does not fit purges the rest of Caches (never the held files), then ENOSPC.
    let big = try box.create("Documents/big")
    var written = 0
    var failure: Errno?
    while written < 8 * mib {
      do throws(Errno) { written += try box.write(big, pattern(256 << 10), at: off_t(written)) } catch {
        failure = error
        break
      }
    }
    #expect(failure == .noSpace, "wrote \(written) bytes")
    #expect(!box.backingHas("Library/Caches/c5") && box.backingHas("Library/Caches/held"))
    #expect(box.used <= capacity)

    // Growing frees room at once.
    _ = box.fs.resize(to: 24 << 20, reason: .resize)
    while written < 8 * mib { written += try box.write(big, pattern(256 << 10), at: off_t(written)) }
    box.release(big)
    #expect(box.eventObjects("capacity").count == 2)
    for file in held { box.release(file) }
    try box.expectExactBooks()
  }

  @Test("usage samples: one at mount, one per interval only after a change, one per resize, one at unmount")
  func usageSamples() throws {
    let box = try Sandbox(capacity: 16 << 20) { $0.usageInterval = 0.2 }
    let first = try #require(box.eventObjects("usage").first)
    #expect(first["reason"] as? String == "mount" && first["state"] as? String == "UNLOCKED")
    #expect(TestFiles.number(first, "capacity") == 16 << 20)

    try box.writeFile("Library/Caches/a", pattern(mib))
    #expect(
      box.eventually {
        box.eventObjects("usage").contains {
          $0["reason"] as? String == "interval" && TestFiles.number($0, "caches") >= Int64(mib)
        }
      })
    // Nothing changes for five intervals: nothing is logged.
    let quiet = box.events("usage").count
    Clock.sleep(seconds: 1)
    #expect(box.events("usage").count == quiet)

    _ = box.fs.resize(to: 8 << 20, reason: .resize)
    let afterResize = try #require(box.eventObjects("usage").last)
    #expect(afterResize["reason"] as? String == "capacity" && TestFiles.number(afterResize, "capacity") == 8 << 20)
    let used = box.used
    box.fs.unmounted()
    let last = try #require(box.eventObjects("usage").last)
    #expect(last["reason"] as? String == "unmount" && TestFiles.number(last, "used") == used)
    // Never two interval samples closer than the interval (less a scheduling margin).
    let times = box.eventObjects("usage").filter { $0["reason"] as? String == "interval" }.map {
      TestFiles.double($0, "time")
    }
    for (earlier, later) in zip(times, times.dropFirst()) { #expect(later - earlier > 0.15, "\(times)") }
  }

  @Test("with a usage interval of 0, samples come only at mount, capacity changes and unmount")
  func noIntervalSamples() throws {
    let box = try Sandbox { $0.usageInterval = 0 }
    try box.writeFile("tmp/a", pattern(mib))
    _ = box.fs.resize(to: 32 << 20, reason: .schedule)
    box.fs.unmounted()
    #expect(box.eventObjects("usage").map { $0["reason"] as? String ?? "" } == ["mount", "capacity", "unmount"])
    #expect(box.eventObjects("capacity").first?["reason"] as? String == "schedule")
  }
}
