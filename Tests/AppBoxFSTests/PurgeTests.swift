import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// What a purge takes and in which order: tmp, then Caches; urgency, then least recently
/// used (or the policy chosen); never an open file.
@Suite("Purge order through the protocol")
struct PurgeOrderTests {
  /// Writes `bytes` to `path` in 256 KiB writes, as a program would.
  static func fill(_ box: Sandbox, _ path: String, bytes count: Int) throws(Errno) -> Int {
    let file = try box.create(path, flags: O_RDWR | O_TRUNC)
    defer { box.release(file) }
    var done = 0
    while done < count {
      done += try box.write(file, pattern(min(256 << 10, count - done), seed: UInt64(done)), at: off_t(done))
    }
    return done
  }

  @Test("tmp goes first, then the least recently used cache files, in order; the write succeeds")
  func tmpThenLeastRecentlyUsed() throws {
    let box = try Sandbox(capacity: 8 << 20)
    let caches = ["c0", "c1", "c2", "c3", "c4"]
    for (index, name) in caches.enumerated() {
      try box.writeFile("Library/Caches/" + name, pattern(mib, seed: UInt64(index + 1)))
    }
    try box.writeFile("tmp/t", pattern(mib / 2, seed: 99))
    // Use order (oldest first): c2 c0 c4 c1 c3; tmp used last of all, yet purged first.
    for name in ["c2", "c0", "c4", "c1", "c3"] { try box.use("Library/Caches/" + name) }
    try box.use("tmp/t")
    #expect(box.purgeable[.caches] == Int64(5 * mib))
    #expect(box.purgeable[.tmp] == Int64(mib / 2))
    #expect(box.purgeableFiles == 6)
    let size = (Int(box.free) + mib / 2 + mib + mib / 2) / 4096 * 4096
    #expect(try Self.fill(box, "Documents/big", bytes: size) == size)

    #expect(box.purgedPaths() == ["tmp/t", "Library/Caches/c2", "Library/Caches/c0"])
    #expect(box.eventObjects("purge").allSatisfy { $0["reason"] as? String == "pressure" })
    for gone in ["tmp/t", "Library/Caches/c2", "Library/Caches/c0"] {
      #expect(!box.backingHas(gone), "\(gone)")
      #expect(throws: Errno.noEntry) { try box.lookup(gone) }
    }
    for (index, name) in caches.enumerated() where ["c4", "c1", "c3"].contains(name) {
      #expect(try box.contents("Library/Caches/" + name) == pattern(mib, seed: UInt64(index + 1)))
    }
    #expect(TestFiles.number(box.status, "purges") == 3)
    #expect(TestFiles.number(box.status, "bytesPurged") == Int64(2 * mib + mib / 2))
    #expect(box.purgeableFiles == 3)
    #expect(box.eventually { Set(box.notifier.names) == ["t", "c2", "c0"] }, "the kernel hears of each")
    try box.expectExactBooks()
  }

  @Test("urgency high, medium, low before none, whatever the use order")
  func urgencyBeforeRecency() throws {
    let box = try Sandbox(capacity: 8 << 20)
    let files = ["none", "low", "medium", "high"]
    for (index, name) in files.enumerated() {
      try box.writeFile("Library/Caches/" + name, pattern(mib, seed: UInt64(index + 1)))
      if name != "none" { try box.setxattr("Library/Caches/" + name, AppBoxAttribute.purgeUrgency.name, name) }
    }
    for name in files { try box.use("Library/Caches/" + name) }  // least recently used: none, low, medium, high
    let size = (Int(box.free) + 2 * mib + mib / 2) / 4096 * 4096
    _ = try Self.fill(box, "Documents/big", bytes: size)
    #expect(box.purgedPaths() == ["Library/Caches/high", "Library/Caches/medium", "Library/Caches/low"])
    #expect(box.backingHas("Library/Caches/none"))
    try box.expectExactBooks()
  }

  @Test("tmp goes before Caches whatever their urgency")
  func tmpBeforeUrgentCaches() throws {
    let box = try Sandbox(capacity: 4 << 20)
    try box.writeFile("Library/Caches/high", pattern(mib))
    try box.setxattr("Library/Caches/high", AppBoxAttribute.purgeUrgency.name, "high")
    try box.writeFile("tmp/plain", pattern(mib))
    #expect(box.fs.purge(.bytes(4096)).files == 1)
    #expect(box.purgedPaths() == ["tmp/plain"])
  }

  @Test("the purge urgency attribute: low, medium, high on files in any domain; anything else EINVAL; removable")
  func urgencyAttribute() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/f", [1])
    for value in ["low", "medium", "high"] {
      try box.setxattr("tmp/f", AppBoxAttribute.purgeUrgency.name, value)
      #expect(try box.getxattr("tmp/f", AppBoxAttribute.purgeUrgency.name) == bytes(value))
    }
    #expect(throws: Errno.invalidArgument) { try box.setxattr("tmp/f", AppBoxAttribute.purgeUrgency.name, "urgent") }
    try box.mkdir("tmp/d")
    #expect(throws: Errno.notPermitted) { try box.setxattr("tmp/d", AppBoxAttribute.purgeUrgency.name, "low") }
    try box.removexattr("tmp/f", AppBoxAttribute.purgeUrgency.name)
    #expect(throws: Errno.noData) { try box.getxattr("tmp/f", AppBoxAttribute.purgeUrgency.name) }
    // Kept on the backing file: a remount orders by it.
    try box.unlink("tmp/f")
    try box.writeFile("Library/Caches/u", [1])
    try box.writeFile("Library/Caches/v", [1])
    try box.setxattr("Library/Caches/v", AppBoxAttribute.purgeUrgency.name, "high")
    let again = try box.remount()
    #expect(again.fs.purge(.bytes(1)).files == 1)
    #expect(again.purgedPaths() == ["Library/Caches/v"])
  }

  @Test("an open cache file survives, a closed one goes; then ENOSPC with a partial write; Documents untouched")
  func openFileSurvivesThenNoSpace() throws {
    var documents: [String: [UInt8]] = [:]
    let box = try Sandbox(
      capacity: 8 << 20,
      prepare: { backing in
        try Sys.mkdir(backing + "/Documents", 0o755)
        try Sys.mkdir(backing + "/Documents/sub", 0o755)
        for (index, name) in ["a.bin", "sub/b.bin", "c.txt"].enumerated() {
          let bytes = pattern(index == 2 ? 100 : mib / 2 + 123 * index, seed: UInt64(40 + index))
          try TestFiles.write(backing + "/Documents/" + name, bytes)
          documents[name] = bytes
        }
      })
    try box.writeFile("Library/Caches/held", pattern(mib, seed: 1))
    try box.writeFile("Library/Caches/closed", pattern(mib, seed: 2))
    try box.use("Library/Caches/closed")
    let held = try box.open("Library/Caches/held")  // the least recently used, but open

    let free = Int(box.free)
    let asked = free + 4 * mib
    let file = try box.create("Documents/huge")
    let first = try box.write(file, pattern(asked, seed: 5))
    #expect(first > 0 && first < asked)
    #expect(abs(first - (free + mib)) <= 4 * 4096, "what was free plus the closed cache file: \(first)")
    #expect(throws: Errno.noSpace) { try box.write(file, pattern(asked - first), at: off_t(first)) }
    box.release(file)
    #expect(box.purgedPaths() == ["Library/Caches/closed"])
    #expect(try box.read(held, count: mib) == pattern(mib, seed: 1))
    #expect(box.fs.storage.books.withLock { $0.noSpaceRefusals } >= 1)
    #expect(box.purgeable[.caches] == 0, "an open file is not purgeable")
    #expect(box.free <= 2 * 4096)
    for (name, expected) in documents { #expect(try box.contents("Documents/" + name) == expected, "\(name)") }
    box.release(held)
    try box.expectExactBooks()
  }

  /// Three Caches files: `old` (created first), `big` (twice as large), `used` (created
  /// last, then `old` is used).
  static func policySandbox(_ policy: PurgePolicy) throws -> Sandbox {
    let box = try Sandbox { $0.purgePolicy = policy }
    try box.writeFile("Library/Caches/old", pattern(100_000))
    try box.writeFile("Library/Caches/big", pattern(400_000))
    try box.writeFile("Library/Caches/middle", pattern(100_000))
    try box.use("Library/Caches/old")
    return box
  }

  @Test("--purge-policy lru: the least recently used goes first, a use counts")
  func lruPolicy() throws {
    let box = try Self.policySandbox(.lru)
    #expect(box.fs.purge(.bytes(1)).files == 1)
    #expect(box.purgedPaths() == ["Library/Caches/big"])
    #expect(box.status["purgePolicy"] as? String == "lru")
  }

  @Test("--purge-policy fifo: the first created goes first, whatever its uses")
  func fifoPolicy() throws {
    let box = try Self.policySandbox(.fifo)
    #expect(box.fs.purge(.bytes(1)).files == 1)
    #expect(box.purgedPaths() == ["Library/Caches/old"])
  }

  @Test("--purge-policy largest: the largest file goes first, freeing the bytes with the fewest files")
  func largestPolicy() throws {
    let box = try Self.policySandbox(.largest)
    try box.use("Library/Caches/big")  // the most recently used, still first
    #expect(box.fs.purge(.bytes(150_000)).files == 1)
    #expect(box.purgedPaths() == ["Library/Caches/big"])
  }

  @Test("a file open through its create is never purged, nor by an explicit purge; its release makes it purgeable")
  func createdHandlePins() throws {
    let box = try Sandbox()
    let file = try box.create("tmp/new")
    #expect(try box.write(file, pattern(100_000)) == 100_000)
    #expect(box.fs.purge(.domain(.tmp)).files == 0)
    #expect(box.fs.purge(.bytes(1 << 30)).files == 0)
    #expect(box.fs.purge(.olderThan(seconds: -10, domain: nil)).files == 0)
    #expect(box.backingHas("tmp/new"))
    box.release(file)
    #expect(box.fs.purge(.domain(.tmp)).files == 1)
    try box.expectExactBooks()
  }

  @Test("two handles pin a file until both are closed")
  func twoHandles() throws {
    let box = try Sandbox()
    try box.writeFile("Library/Caches/f", pattern(10_000))
    let first = try box.open("Library/Caches/f")
    let second = try box.open("Library/Caches/f", flags: O_RDWR)
    box.release(first)
    #expect(box.fs.purge(.domain(.caches)).files == 0)
    box.release(second)
    #expect(box.fs.purge(.domain(.caches)).files == 1)
  }

  @Test("a failed open leaves no pin: the file stays purgeable")
  func failedOpenLeavesNoPin() throws {
    let box = try Sandbox()
    try box.mkdir("tmp/a")
    try box.protect("tmp/a", "complete")
    try box.writeFile("tmp/a/f", pattern(10_000))
    #expect(box.fs.lock() == .locked)
    #expect(throws: Errno.notPermitted) { try box.open("tmp/a/f") }
    #expect(box.purgeableFiles == 1)
    #expect(box.fs.purge(.domain(.tmp)).files == 1, "protection never keeps a file from a purge")
  }

  @Test("an explicit purge of bytes frees at least that many, least recently used first, tmp before Caches")
  func purgeBytes() throws {
    let box = try Sandbox()
    for name in ["a", "b", "c"] { try box.writeFile("Library/Caches/" + name, pattern(100_000)) }
    try box.writeFile("tmp/t", pattern(50_000))
    try box.use("Library/Caches/a")
    let result = box.fs.purge(.bytes(120_000))
    #expect(result.files == 2)
    #expect(result.bytes >= 120_000)
    #expect(box.purgedPaths(reason: "explicit") == ["tmp/t", "Library/Caches/b"])
    #expect(box.backingHas("Library/Caches/a") && box.backingHas("Library/Caches/c"))
    #expect(box.fs.purge(.bytes(1)).files == 1)
    #expect(box.purgedPaths(reason: "explicit").last == "Library/Caches/c", "then the next least recently used")
    try box.expectExactBooks()
  }

  @Test("a purge of a domain empties it, subdirectories included, and leaves the directories; the other domain stays")
  func purgeDomain() throws {
    let box = try Sandbox()
    try box.mkdir("Library/Caches/d")
    try box.mkdir("Library/Caches/d/e")
    try box.writeFile("Library/Caches/d/e/f", pattern(10_000))
    try box.writeFile("Library/Caches/g", pattern(10_000))
    try box.writeFile("tmp/t", pattern(10_000))
    try box.symlink("g", at: "Library/Caches/link")
    #expect(box.fs.purge(.domain(.caches)).files == 2)
    #expect(box.backingList("Library/Caches") == ["d", "link"], "directories and symlinks stay")
    #expect(box.backingList("Library/Caches/d/e") == [])
    #expect(box.backingHas("tmp/t"))
    #expect(box.fs.purge(.domain(.tmp)).files == 1)
    #expect(box.backingList("tmp") == [])
    try box.expectExactBooks()
  }

  @Test("a purge of what is older than an age takes what aged and keeps what was just used")
  func purgeOlderThan() throws {
    let box = try Sandbox(prepare: { backing in
      try Sys.mkdir(backing + "/tmp", 0o755)
      try Sys.mkdir(backing + "/Library", 0o755)
      try Sys.mkdir(backing + "/Library/Caches", 0o755)
      for path in ["tmp/old", "tmp/used", "Library/Caches/old"] {
        try TestFiles.write(backing + "/" + path, pattern(1000))
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, backing + "/" + path, &times, 0) == 0)
      }
    })
    try box.writeFile("tmp/new", pattern(1000))
    try box.use("tmp/used")
    #expect(box.fs.purge(.olderThan(seconds: 3600, domain: .tmp)).files == 1)
    #expect(box.purgedPaths(reason: "age") == ["tmp/old"])
    #expect(box.backingHas("Library/Caches/old"), "only the domain asked for")
    #expect(box.fs.purge(.olderThan(seconds: 3600, domain: nil)).files == 1)
    #expect(!box.backingHas("Library/Caches/old"))
    #expect(box.fs.purge(.olderThan(seconds: .infinity, domain: nil)).files == 0, "nothing is that old")
    try box.expectExactBooks()
  }

  @Test("above the high water mark the filesystem purges down to the low one by itself")
  func waterMarks() throws {
    let box = try Sandbox(capacity: 4 << 20) {
      $0.waterMarks = try? WaterMarks(high: Percentage(50), low: Percentage(25))
    }
    for index in 0..<10 { try box.writeFile("Library/Caches/c\(index)", pattern(256 << 10, seed: UInt64(index))) }
    #expect(box.used > 2 << 20 || !box.purgedPaths(reason: "watermark").isEmpty)
    #expect(
      box.eventually { box.used <= 1 << 20 && !box.purgedPaths(reason: "watermark").isEmpty },
      "down to 25% within a few ticks")
    #expect(box.purgedPaths(reason: "watermark").first == "Library/Caches/c0")
    #expect(box.backingHas("Library/Caches/c9"))
    try box.expectExactBooks()
  }

  @Test("--tmp-max-age purges unused tmp files in the background, and nothing in Caches")
  func tmpMaxAge() throws {
    let box = try Sandbox({ $0.tmpMaxAge = 3600 }) { backing in
      try Sys.mkdir(backing + "/tmp", 0o755)
      try Sys.mkdir(backing + "/Library", 0o755)
      try Sys.mkdir(backing + "/Library/Caches", 0o755)
      for path in ["tmp/old", "Library/Caches/old"] {
        try TestFiles.write(backing + "/" + path, pattern(1000))
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, backing + "/" + path, &times, 0) == 0)
      }
    }
    try box.writeFile("tmp/fresh", pattern(1000))
    #expect(box.eventually { box.purgedPaths() == ["tmp/old"] })
    #expect(!box.backingHas("tmp/old"))
    #expect(box.purgedPaths(reason: "age") == ["tmp/old"])
    #expect(box.backingHas("Library/Caches/old") && box.backingHas("tmp/fresh"))
  }

  @Test("a purge event names the path, the bytes, the domain, the reason and the last use")
  func purgeEvent() throws {
    let box = try Sandbox()
    try box.mkdir("Library/Caches/dir")
    try box.writeFile("Library/Caches/dir/f", pattern(10_000))
    let before = Clock.unix()
    _ = box.fs.purge(.domain(.caches))
    let event = try #require(box.eventObjects("purge").first)
    #expect(event["path"] as? String == "Library/Caches/dir/f")
    #expect(TestFiles.number(event, "bytes") == 12_288)
    #expect(event["domain"] as? String == "caches")
    #expect(event["reason"] as? String == "explicit")
    #expect(abs(TestFiles.double(event, "lastUse") - before) < 5)
    #expect(TestFiles.double(event, "time") >= before - 1)
  }

  @Test("the kernel is told before an explicit purge returns: a deletion for a held node, else an entry invalidation")
  func kernelNotifications() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/held", pattern(1000))
    let held = try box.lookup("tmp/held")
    try box.writeFile("tmp/other", pattern(1000))
    let tmp = try box.lookup("tmp")
    // "other" was created through the protocol too: forget it, as the kernel would.
    let other = try box.lookup("tmp/other")
    box.fs.forget(other, count: box.lookups(other))
    _ = box.fs.purge(.domain(.tmp))
    #expect(box.notifier.calls.contains(.delete(parent: tmp, child: held, name: bytes("held"))))
    #expect(box.notifier.calls.contains(.invalidateEntry(parent: tmp, name: bytes("other"))))
  }

  @Test("a purged file the kernel still holds: getattr and open answer ESTALE, a lookup finds nothing")
  func purgedNodeIsStale() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/f", pattern(1000))
    let node = try box.lookup("tmp/f")
    _ = box.fs.purge(.domain(.tmp))
    #expect(throws: Errno.stale) { try box.fs.getattr(Sandbox.root, node: node, handle: nil) }
    #expect(throws: Errno.stale) { try box.fs.open(Sandbox.root, node: node, flags: O_RDONLY) }
    #expect(throws: Errno.noEntry) { try box.lookup("tmp/f") }
    let recreated = try box.create("tmp/f", flags: O_RDWR)  // an O_CREAT open after the ESTALE
    #expect(recreated.node != node)
    box.release(recreated)
    try box.expectExactBooks()
  }

  @Test("a large purge reports its progress every 512 files")
  func progress() throws {
    let box = try Sandbox(prepare: { backing in
      try Sys.mkdir(backing + "/tmp", 0o755)
      for index in 0..<1100 { try TestFiles.write(backing + "/tmp/f\(index)", [1]) }
    })
    let reports = ReportList()
    let result = box.fs.purge(.domain(.tmp)) { files, bytes in reports.append(files, bytes) }
    #expect(result.files == 1100)
    #expect(reports.files == [512, 1024])
    #expect(box.backingList("tmp") == [])
    try box.expectExactBooks()
  }
}

/// Progress reports, collected from the purge's threads.
final class ReportList: Sendable {
  private let list = Mutex<[(Int, Int64)]>([])
  func append(_ files: Int, _ bytes: Int64) { list.withLock { $0.append((files, bytes)) } }
  var files: [Int] { list.withLock { $0.map(\.0).sorted() } }
}
