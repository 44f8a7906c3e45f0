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
    "a writer joining passthrough readers fills a file truncated up through a shared mapping past the quota (known issue)"
  )
  func passthroughWriterMappingStaysInQuota() throws {
    let fixture = try MountFixture.unlocked(["--capacity", "8M"])
    let path = fixture.path("Documents/mapped")
    try writeFile(path, pattern(4096, seed: 1))
    #expect(Quota.waitForReleases(fixture))
    let reader = try openFile(path, O_RDONLY)
    let writer = try openFile(path, O_RDWR)
    let size = 64 << 20
    #expect(ftruncate(writer, off_t(size)) == 0, "a sparse file allocates nothing")
    let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, writer, 0)
    if mapped != MAP_FAILED, let mapped {
      // Were it mapped, every page touched would allocate a block of the backing file.
      let bytes = mapped.assumingMemoryBound(to: UInt8.self)
      for offset in stride(from: 0, to: size, by: 4096) { bytes[offset] = 0x41 }
      _ = msync(mapped, size, MS_SYNC)
      munmap(mapped, size)
    } else {
      #expect(errno == EACCES, "the mapping is refused: \(String(cString: strerror(errno)))")
    }
    close(writer)
    close(reader)
    #expect(Quota.waitForReleases(fixture))
    // Known, not fixed (red-team 2, finding 7): the mapping is the backing file's (the
    // kernel's passthrough mmap), whose pages no request brings to the daemon; the blocks
    // are measured at the close, after the fact, and the sandbox is then 56 MiB over its
    // capacity. A fix makes this test fail here: then drop the known issue.
    let held = try Quota.du(fixture.backing)
    // Without passthrough the mapping is the page cache's, written back through the daemon
    // (ENOSPC at the capacity): the quota holds.
    let passthrough = try Quota.status(fixture.mountpoint)["passthrough"] as? Bool ?? false
    withKnownIssue("a joined writer's shared mapping fills holes past the capacity") {
      #expect(held <= 8 << 20, "the backing directory holds \(held) bytes, at most the capacity")
    } when: {
      passthrough
    }
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
