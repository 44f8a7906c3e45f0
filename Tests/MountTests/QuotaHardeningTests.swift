import CPosixShim
import Foundation
import Posix
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The quota's bookkeeping where it used to leak and only a kernel shows it: open files
/// re-opened while purges race them, and a writer joining passthrough readers. (The books
/// of attribute blocks, a failed fallocate, O_TRUNC opens and injected errors are tested
/// below the mount: AppBoxFSTests.)
@Suite("Quota hardening", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct QuotaHardeningTests {
  // MARK: - Open files and purges

  @Test("files re-opened with O_CREAT | O_APPEND while others fill the quota: none purged while open, no ENOENT")
  func openFilesAreNeverPurged() throws {
    let fixture = try MountFixture.unlocked(["--capacity", "4M"])
    let result = Churn.run(fixture, seconds: 4, reopeners: 20, fillers: 10)
    #expect(result.failures.isEmpty, "\(result.failures.prefix(10)) (\(result.failures.count) in all)")
    #expect(result.reopens > 100, "the re-openers ran (\(result.reopens))")
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: 4 << 20)
    #expect(try Quota.du(fixture.backing) <= 4 << 20)
    try fixture.unmount()
  }

  // MARK: - Blocks that must be charged

  @Test("a writer joining passthrough readers stays within the quota: 16 MiB into an 8M sandbox is ENOSPC")
  func passthroughWriterStaysInQuota() throws {
    let fixture = try MountFixture.unlocked(["--capacity", "8M"])
    let path = fixture.path("Documents/shared")
    try writeFile(path, pattern(4096, seed: 1))
    #expect(Quota.waitForReleases(fixture))
    let reader = try openFile(path, O_RDONLY)
    let writer = try openFile(path, O_WRONLY)
    let chunk = pattern(1 << 20, seed: 2)
    var written = 0
    var failure: Int32 = 0
    while written < 16 << 20 {
      let count = chunk.withUnsafeBufferPointer { pwrite(writer, $0.baseAddress!, $0.count, off_t(4096 + written)) }
      if count <= 0 {
        failure = errno
        break
      }
      written += count
    }
    #expect(failure == ENOSPC, "written \(written) bytes, then errno \(failure)")
    #expect(written < 8 << 20)
    // The reader sees what the writer wrote.
    #expect(try readAt(reader, count: 4096, offset: 4096) == Array(chunk.prefix(4096)))
    close(writer)
    close(reader)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: 8 << 20)
    try fixture.unmount()
  }

  @Test(
    "a read-write handle joining a passthrough reader cannot fill holes through a shared mapping past the quota, not even after its close",
    arguments: [[], ["--no-passthrough"]])
  func passthroughWriterMappingStaysInQuota(options: [String]) throws {
    let fixture = try MountFixture.unlocked(["--capacity", "8M"] + options)
    let path = fixture.path("Documents/mapped")
    try writeFile(path, pattern(4096, seed: 1))
    #expect(Quota.waitForReleases(fixture))
    let passthrough = try Quota.status(fixture.mountpoint)["passthrough"] as? Bool ?? false
    if !options.isEmpty { #expect(!passthrough) }
    let reader = try openFile(path, O_RDONLY)
    let writer = try openFile(path, O_RDWR)
    let size = 64 << 20
    // With passthrough the writer joins the reader, and a shared mapping of it is the
    // backing file's, whose writes no request brings to the daemon: so the file keeps no
    // holes, and a growth is allocated (64 MiB does not fit). Without passthrough the
    // growth is a hole, and the mapping is the page cache's, written back through the
    // daemon (ENOSPC at the capacity).
    let grown = ftruncate(writer, off_t(size)) == 0
    let failure = errno
    if passthrough { #expect(!grown && failure == ENOSPC, "errno \(failure)") }
    let filled = grown ? size : 4 << 20
    if !grown { #expect(ftruncate(writer, off_t(filled)) == 0, "4 MiB fits, and is allocated") }
    // Mapped whole (past the end too, where the file might grow later).
    let mapping = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, writer, 0)
    let mapped = try #require(mapping == MAP_FAILED ? nil : mapping, "mmap: \(String(cString: strerror(errno)))")
    if passthrough {
      // The mapping is the backing file's and outlives both handles: their releases come now.
      close(writer)
      close(reader)
      #expect(Quota.waitForReleases(fixture))
    }
    let bytes = mapped.assumingMemoryBound(to: UInt8.self)
    for offset in stride(from: 0, to: filled, by: 4096) { bytes[offset] = 0x41 }
    if passthrough {
      // Nothing is open, but the mapping would fill what a truncate up leaves: allocated too.
      #expect(truncate(path, off_t(size)) == -1 && errno == ENOSPC, "a truncate by path is held to the quota")
    }
    _ = msync(mapped, size, MS_SYNC)
    munmap(mapped, size)
    if !passthrough {
      close(writer)
      close(reader)
    }
    #expect(Quota.waitForReleases(fixture))
    let held = try Quota.du(fixture.backing)
    #expect(held <= 8 << 20, "the backing directory holds \(held) bytes, at most the capacity")
    if passthrough {
      let check = try openFile(path, O_RDONLY)
      #expect(try readAt(check, count: 1, offset: off_t(filled - 4096)) == [0x41], "the mapping's writes are there")
      close(check)
      #expect(Quota.waitForReleases(fixture))
    }
    try Quota.expectBooksMatch(fixture, capacity: 8 << 20)
    try fixture.unmount()
  }

  @Test(
    "a writer that opens before the reader maps the page cache (ENOSPC at the capacity); one that joins it is held to the quota by path, by fallocate and beside a second writer"
  )
  func passthroughWriterOrdersStayInQuota() throws {
    let fixture = try MountFixture.unlocked(["--capacity", "8M"])
    let passthrough = try Quota.status(fixture.mountpoint)["passthrough"] as? Bool ?? false
    let size = 64 << 20
    // The writer first: no passthrough for either, the growth is a hole, and the mapping's
    // pages are written back through the daemon, which refuses what does not fit.
    let first = fixture.path("Documents/first")
    try writeFile(first, pattern(4096, seed: 1))
    #expect(Quota.waitForReleases(fixture))
    let early = try openFile(first, O_RDWR)
    let late = try openFile(first, O_RDONLY)
    #expect(ftruncate(early, off_t(size)) == 0, "a hole: nothing allocated")
    let mapping = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, early, 0)
    let mapped = try #require(mapping == MAP_FAILED ? nil : mapping, "mmap: \(String(cString: strerror(errno)))")
    let bytes = mapped.assumingMemoryBound(to: UInt8.self)
    for offset in stride(from: 0, to: size, by: 4096) { bytes[offset] = 0x42 }
    _ = msync(mapped, size, MS_SYNC)
    munmap(mapped, size)
    close(late)
    close(early)
    #expect(Quota.waitForReleases(fixture))
    #expect(try Quota.du(fixture.backing) <= 8 << 20)
    try Quota.expectBooksMatch(fixture, capacity: 8 << 20)
    #expect(unlink(first) == 0)
    #expect(Quota.waitForReleases(fixture))

    // A reader first, then two read-write handles join it.
    let path = fixture.path("Documents/joined")
    try writeFile(path, pattern(4096, seed: 2))
    #expect(Quota.waitForReleases(fixture))
    let reader = try openFile(path, O_RDONLY)
    let writer = try openFile(path, O_RDWR)
    let second = try openFile(path, O_RDWR)
    if passthrough {
      #expect(truncate(path, off_t(size)) == -1 && errno == ENOSPC, "a truncate by path while the writers are open")
      #expect(
        Sys2.fallocate(writer, off_t(size), 4096) == -1 && errno == ENOSPC, "an allocation past the end")
      #expect(ftruncate(second, off_t(size)) == -1 && errno == ENOSPC, "the second writer")
    }
    #expect(ftruncate(second, 2 << 20) == 0)
    #expect(Sys2.fallocate(writer, 3 << 20, 4096) == 0)
    let mapping2 = mmap(nil, 4 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, writer, 0)
    let mapped2 = try #require(mapping2 == MAP_FAILED ? nil : mapping2, "mmap: \(String(cString: strerror(errno)))")
    // With passthrough the mapping is the backing file's, and outlives the handles.
    close(second)
    close(writer)
    close(reader)
    if passthrough { #expect(Quota.waitForReleases(fixture)) }
    let bytes2 = mapped2.assumingMemoryBound(to: UInt8.self)
    for offset in stride(from: 0, to: (3 << 20) + 4096, by: 4096) { bytes2[offset] = 0x43 }
    _ = msync(mapped2, 4 << 20, MS_SYNC)
    munmap(mapped2, 4 << 20)
    #expect(Quota.waitForReleases(fixture))
    #expect(try Quota.du(fixture.backing) <= 8 << 20)
    try Quota.expectBooksMatch(fixture, capacity: 8 << 20)
    try fixture.unmount()
  }
}

/// Programs re-opening their own cache files while others fill the quota (threads of
/// this process, each doing plain syscalls).
enum Churn {
  struct Result {
    var failures: [String] = []
    var reopens = 0
  }

  /// Runs `reopeners` threads that open `Library/Caches/hNN` with `O_CREAT | O_APPEND`,
  /// write, check the open descriptor still names the file, and close; and `fillers`
  /// threads that write new 128 KiB cache files; for `seconds`.
  static func run(
    _ fixture: MountFixture, seconds: Double, reopeners: Int, fillers: Int, extra: [@Sendable (Date) -> [String]] = []
  ) -> Result {
    let deadline = Date().addingTimeInterval(seconds)
    let outcome = LockedValue(Result())
    let group = DispatchGroup()
    let mountpoint = fixture.mountpoint
    let backing = fixture.backing
    for index in 0..<reopeners {
      group.enter()
      Thread.detachNewThread {
        defer { group.leave() }
        let name = "Library/Caches/h\(index)"
        let block = [UInt8](repeating: UInt8(index), count: 4096)
        var failures: [String] = []
        var reopens = 0
        while Date() < deadline {
          let fd = open(mountpoint + "/" + name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
          guard fd >= 0 else {
            // A full sandbox (everything purgeable open) may refuse a new name: ENOSPC.
            if errno != ENOSPC { failures.append("open(O_CREAT) \(name): \(String(cString: strerror(errno)))") }
            continue
          }
          reopens += 1
          for _ in 0..<2 {
            let written = block.withUnsafeBufferPointer { write(fd, $0.baseAddress!, $0.count) }
            if written < 0, errno != ENOSPC { failures.append("write \(name): \(String(cString: strerror(errno)))") }
            var held = stat()
            var named = stat()
            if fstat(fd, &held) != 0 {
              failures.append("fstat on the open \(name): \(String(cString: strerror(errno)))")
            } else if lstat(backing + "/" + name, &named) != 0 || named.st_ino != held.st_ino {
              failures.append("\(name) purged while open")
            }
          }
          close(fd)
        }
        outcome.withLock {
          $0.failures += failures
          $0.reopens += reopens
        }
      }
    }
    for index in 0..<fillers {
      group.enter()
      Thread.detachNewThread {
        defer { group.leave() }
        let block = [UInt8](repeating: 0xF0, count: 128 << 10)
        var serial = 0
        var failures: [String] = []
        while Date() < deadline {
          let path = mountpoint + "/Library/Caches/fill-\(index)-\(serial)"
          serial += 1
          let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
          guard fd >= 0 else {
            if errno != ENOSPC { failures.append("open \(path): \(String(cString: strerror(errno)))") }
            continue
          }
          if block.withUnsafeBufferPointer({ write(fd, $0.baseAddress!, $0.count) }) < 0, errno != ENOSPC {
            failures.append("write \(path): \(String(cString: strerror(errno)))")
          }
          close(fd)
        }
        outcome.withLock { $0.failures += failures }
      }
    }
    for work in extra {
      group.enter()
      Thread.detachNewThread {
        defer { group.leave() }
        let failures = work(deadline)
        outcome.withLock { $0.failures += failures }
      }
    }
    group.wait()
    return outcome.withLock { $0 }
  }
}

/// A lock around a value for the test threads.
final class LockedValue<Value>: @unchecked Sendable {
  // @unchecked: every access to `value` holds `lock`.
  private let lock = NSLock()
  private var value: Value

  init(_ value: Value) { self.value = value }

  func withLock<R>(_ body: (inout Value) -> R) -> R {
    lock.lock()
    defer { lock.unlock() }
    return body(&value)
  }
}
