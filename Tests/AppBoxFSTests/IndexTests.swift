import AppBoxEvents
import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// The mount-time index of a backing tree (usage as `du` counts it, the purge catalog
/// with each file's urgency and last use), the default class a tree was last mounted
/// with, and what `appbox status` reports.
@Suite("The mount-time index, the default class and the status through the protocol")
struct IndexTests {
  /// Writes `bytes` into a backing file, making its directories.
  static func put(_ backing: String, _ path: String, _ bytes: [UInt8], seconds: Int? = nil) throws {
    var directory = backing
    for component in path.split(separator: "/").dropLast() {
      directory += "/" + component
      if !TestFiles.exists(directory) { try Sys.mkdir(directory, 0o755) }
    }
    try TestFiles.write(backing + "/" + path, bytes)
    if let seconds {
      var times = [timespec(tv_sec: seconds, tv_nsec: 0), timespec(tv_sec: seconds, tv_nsec: 0)]
      guard utimensat(AT_FDCWD, backing + "/" + path, &times, 0) == 0 else { throw Errno.current }
    }
  }

  @Test("a tree copied in before the mount is indexed as du counts it: hard links once, every domain")
  func indexMatchesDu() throws {
    let box = try Sandbox(prepare: { backing in
      try Self.put(backing, "Documents/a/b/c", pattern(100_000))
      try Self.put(backing, "Library/Application Support/db", pattern(50_000))
      try Self.put(backing, "Library/Preferences/p.plist", pattern(3000))
      try Self.put(backing, "Library/Caches/x/y", pattern(70_000))
      try Self.put(backing, "tmp/t", pattern(10_000))
      try Self.put(backing, "Library/Other/z", pattern(20_000))
      guard link(backing + "/Documents/a/b/c", backing + "/Documents/a/c2") == 0 else { throw Errno.current }
      guard symlink("a/b/c", backing + "/Documents/s") == 0 else { throw Errno.current }
    })
    try box.expectExactBooks()
    #expect(box.usage[.library]! >= 20_000, "Library's own content is counted, in no purgeable domain")
    #expect(box.purgeableFiles == 2)
  }

  @Test("the index catalogs files in nested Caches and tmp directories, but not hard-linked ones")
  func indexCatalog() throws {
    let box = try Sandbox(prepare: { backing in
      try Self.put(backing, "Library/Caches/a/b/c/deep", pattern(10_000))
      try Self.put(backing, "tmp/linked", pattern(10_000))
      guard link(backing + "/tmp/linked", backing + "/tmp/linked2") == 0 else { throw Errno.current }
    })
    #expect(box.purgeableFiles == 1)
    #expect(box.fs.purge(.domain(.tmp)).files == 0, "a file with two links is not purged")
    #expect(box.fs.purge(.domain(.caches)).files == 1)
    #expect(box.purgedPaths() == ["Library/Caches/a/b/c/deep"], "its path is known to the catalog")
    try box.expectExactBooks()
  }

  @Test("the index orders Caches by each file's own last use, and reads its purge urgency")
  func indexOrder() throws {
    let box = try Sandbox(prepare: { backing in
      try Self.put(backing, "Library/Caches/newest", pattern(1000), seconds: 1_700_000_300)
      try Self.put(backing, "Library/Caches/oldest", pattern(1000), seconds: 1_700_000_100)
      try Self.put(backing, "Library/Caches/middle", pattern(1000), seconds: 1_700_000_200)
      try Self.put(backing, "Library/Caches/urgent", pattern(1000), seconds: 1_700_000_400)
      let fd = try Sys.open(backing + "/Library/Caches/urgent", Linux.openPath | O_CLOEXEC)
      defer { Sys.close(fd) }
      try Xattr.set(fd, name: AppBoxAttribute.purgeUrgency.name, value: bytes("low"))
    })
    for _ in 0..<4 { _ = box.fs.purge(.bytes(1)) }
    #expect(
      box.purgedPaths() == [
        "Library/Caches/urgent", "Library/Caches/oldest", "Library/Caches/middle", "Library/Caches/newest",
      ])
  }

  @Test("a sandbox mounted again with another default class stamps the items that had none, once")
  func defaultAdoption() throws {
    let root = try SandboxRoot()
    try Self.put(root.backing, "Documents/a", [1])
    try Self.put(root.backing, "Documents/d/b", [1])
    try Self.put(root.backing, "tmp/t", [1])
    let rootFD = try Sys.open(root.backing, Linux.openPath | O_DIRECTORY | O_CLOEXEC)
    defer { Sys.close(rootFD) }
    #expect(try DefaultProtection.adopt(.containerDefault, rootFD: rootFD) == 0, "the first mount records its default")
    #expect(try DefaultProtection.recorded(rootFD: rootFD) == .containerDefault)
    // Another default: the four items without a class get the old one (not the layout's
    // fixed directories, which have none and follow the mount's default).
    #expect(try DefaultProtection.adopt(.none, rootFD: rootFD) == 4)
    #expect(try DefaultProtection.recorded(rootFD: rootFD) == ProtectionClass.none)
    #expect(try DefaultProtection.adopt(.none, rootFD: rootFD) == 0, "the same default again stamps nothing")
    let inherited = { (path: String) -> String? in
      guard let fd = try? Sys.open(root.backing + "/" + path, Linux.openPath | O_CLOEXEC) else { return nil }
      defer { Sys.close(fd) }
      return (try? Xattr.value(fd, name: AppBoxAttribute.inheritedProtectionName)).map {  // nil: none stored
        String(decoding: $0, as: UTF8.self)
      }
    }
    #expect(inherited("Documents/a") == "completeUntilFirstUserAuthentication")
    #expect(inherited("Documents/d") == "completeUntilFirstUserAuthentication")
    #expect(inherited("Documents") == nil)
  }

  @Test("the status reports the state, capacity, usage and purgeable bytes by domain, and the counters")
  func status() throws {
    let box = try Sandbox(capacity: 16 << 20) { $0.gracePeriod = 600 }
    try box.writeFile("Library/Caches/c", pattern(100_000))
    try box.writeFile("tmp/t", pattern(50_000))
    #expect(box.fs.lock() == .grace)
    let status = box.status
    #expect(status["state"] as? String == "GRACE")
    #expect(status["cxExpired"] as? Bool == false)
    #expect(TestFiles.number(status, "capacity") == 16 << 20)
    #expect(TestFiles.number(status, "used") == box.used)
    #expect(TestFiles.number(status, "free") == box.free)
    #expect(TestFiles.number(status, "usage.caches") == box.usage[.caches]!)
    #expect(TestFiles.number(status, "usage.tmp") == box.usage[.tmp]!)
    #expect(TestFiles.number(status, "purgeable.caches") == box.purgeable[.caches]!)
    #expect(TestFiles.number(status, "purgeableFiles") == 2)
    #expect(TestFiles.number(status, "purges") == 0 && TestFiles.number(status, "noSpaceRefusals") == 0)
    #expect(status["defaultProtection"] as? String == "completeUntilFirstUserAuthentication")
    #expect(TestFiles.double(status, "gracePeriod") == 600)
    #expect(status["passthrough"] as? Bool == false, "no kernel, no passthrough")
    #expect(TestFiles.number(status, "nodes") == Int64(box.fs.inodes.count))
  }

  @Test("the status names the backing directory, its bytes as they are (not UTF-8 too)")
  func statusBacking() throws {
    let box = try Sandbox()
    #expect(box.status["backing"] as? String == box.backing)
  }

  @Test("events are JSON lines, one a line, in the order they happened")
  func eventLog() throws {
    let box = try Sandbox { $0.usageInterval = 0 }
    try box.mkdir("Documents/a")
    try box.protect("Documents/a", "complete")
    try box.writeFile("Documents/a/f", [1])
    try box.writeFile("tmp/t", [1])
    #expect(box.fs.lock() == .locked)
    #expect(throws: Errno.notPermitted) { try box.open("Documents/a/f") }
    _ = box.fs.purge(.domain(.tmp))
    _ = box.fs.resize(to: 32 << 20, reason: .resize)
    box.fs.unmounted()
    let text = try #require(TestFiles.text(of: box.eventsPath))
    let types = text.split(separator: "\n").map { TestFiles.jsonObject(String($0))?["type"] as? String ?? "not JSON" }
    // The log's header first; a usage sample after the purge and after the capacity change.
    #expect(types == ["log", "usage", "state", "refusal", "purge", "usage", "capacity", "usage", "usage"])
  }

  @Test("an event log released with lines still to write writes them all to its own file, none to a file opened since")
  func eventLogReleasedEarly() throws {
    let root = try SandboxRoot()
    let first = root.base + "/first.jsonl"
    let second = root.base + "/second.jsonl"
    do {
      let log = EventLog(path: first, id: "20260101-000000-0001", limits: EventLogLimits())
      for index in 0..<2000 {
        log.record(.state(DeviceStateEvent(time: Double(index), from: .unlocked, to: .locked)))
      }
    }  // released here, most lines still queued
    let other = try Sys.openat(AT_FDCWD, second, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    defer { Sys.close(other) }
    let lines = { (path: String) in TestFiles.text(of: path)?.split(separator: "\n").count ?? 0 }
    let deadline = Clock.monotonic() + 30
    // 2000 events and the header line.
    while lines(first) < 2001 && Clock.monotonic() < deadline { Clock.sleep(seconds: 0.01) }
    #expect(lines(first) == 2001)
    #expect(lines(second) == 0, "no line in a file that took the closed descriptor's number")
  }
}
