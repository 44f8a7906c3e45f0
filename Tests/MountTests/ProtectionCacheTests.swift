import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A child process the test talks to line by line (stdin/stdout).
final class InteractiveChild {
  let process = Process()
  private let input = Pipe()
  private let output = Pipe()
  private let errors = Pipe()
  private var buffered = Data()

  init(_ executable: String, _ arguments: [String]) throws {
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardInput = input
    process.standardOutput = output
    process.standardError = errors
    try process.run()
  }

  /// The next line the child writes, or nil at end of file.
  func readLine() -> String? {
    while true {
      if let newline = buffered.firstIndex(of: 0x0A) {
        let line = String(decoding: buffered[..<newline], as: UTF8.self)
        buffered.removeSubrange(...newline)
        return line
      }
      let more = output.fileHandleForReading.availableData
      if more.isEmpty { return nil }
      buffered.append(more)
    }
  }

  func send(_ line: String) {
    input.fileHandleForWriting.write(Data((line + "\n").utf8))
  }

  /// Waits for the child to end; its stderr.
  func wait() -> String {
    try? input.fileHandleForWriting.close()
    let stderr = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: stderr, as: UTF8.self)
  }
}

@Suite("Data Protection and the kernel's caches", .needsFUSE, .timeLimit(.minutes(10)))
struct ProtectionCacheTests {
  static let secret = String(repeating: "TOPSECRET-", count: 1000)  // 10,000 bytes: three pages

  /// Creates `relative` on the mount with `contents` and class `protectionClass`.
  func makeFile(_ fixture: MountFixture, _ relative: String, _ protectionClass: TestClass, _ contents: String) throws {
    let path = fixture.path(relative)
    try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
    try #require(Sys2.setxattr(path, ProtectionAttribute.protection, protectionClass.name) == 0)
    try #require(Sys2.protection(path) == protectionClass.name)
  }

  @Test("class A while LOCKED: no content from the page cache, old handles and fresh opens refused, back on unlock")
  func pageCacheAndOldDescriptor() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    try makeFile(fixture, "Documents/secret", .A, Self.secret)
    try makeFile(fixture, "Documents/plain", .C, Self.secret)

    let (fd, opened) = Sys2.open(fixture.path("Documents/secret"), O_RDONLY)
    try #require(opened == .ok)
    let (plain, plainOpened) = Sys2.open(fixture.path("Documents/plain"), O_RDONLY)
    try #require(plainOpened == .ok)
    // Read everything twice so the pages are in the kernel's cache.
    for _ in 0..<2 {
      #expect(Sys2.pread(fd, count: 10_000).1 == Self.secret)
      #expect(Sys2.pread(plain, count: 10_000).1 == Self.secret)
    }

    try fixture.control("lock")
    try fixture.waitForState("LOCKED")

    let (outcome, text) = Sys2.pread(fd, count: 10_000)
    #expect(
      outcome == .eperm, "read through the old descriptor of a class-A file while LOCKED returned \(text.count) bytes")
    #expect(Sys2.pread(fd, count: 16, offset: 8192).0 == .eperm, "last page, also cached before the lock")
    #expect(Sys2.tryOpen(fixture.path("Documents/secret"), O_RDONLY) == .eperm)
    // Class C stays readable, from the same cache.
    #expect(Sys2.pread(plain, count: 10_000).1 == Self.secret)

    try fixture.control("unlock")
    #expect(Sys2.pread(fd, count: 10_000).1 == Self.secret)
    close(fd)
    close(plain)
    try fixture.unmount()
  }

  /// A reader that checks the device-state attribute, then reads cached class-A pages,
  /// in a loop while the device locks: once the attribute reads LOCKED, no read succeeds.
  @Test("no read of cached class-A pages succeeds once the device-state attribute reads LOCKED")
  func noReadAfterLockedShows() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    try makeFile(fixture, "Documents/secret", .A, Self.secret)
    let (fd, opened) = Sys2.open(fixture.path("Documents/secret"), O_RDONLY)
    try #require(opened == .ok)
    let root = fixture.mountpoint
    var late = 0
    for _ in 0..<100 {
      for _ in 0..<2 { #expect(Sys2.pread(fd, count: 10_000).1 == Self.secret) }  // cached
      let reader = LockedReadProbe(fd: fd, root: root)
      try fixture.control("lock")
      late += reader.waitForLockedRead()
      try fixture.control("unlock")
    }
    #expect(late == 0, "\(late) reads of class-A content succeeded after the attribute read LOCKED")
    close(fd)
    try fixture.unmount()
  }

  @Test("class A: an mmap'd page faults with SIGBUS once LOCKED")
  func mmapFaultsOnLock() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    try makeFile(fixture, "Documents/secret", .A, Self.secret)
    let script = """
      import mmap, sys
      f = open(sys.argv[1], 'rb')
      m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
      print(m[0:10].decode(), m[8192:8202].decode(), flush=True)
      sys.stdin.readline()
      print(m[0:10].decode(), flush=True)
      print(m[8192:8202].decode(), flush=True)
      """
    let child = try InteractiveChild("/usr/bin/python3", ["-c", script, fixture.path("Documents/secret")])
    #expect(child.readLine() == "TOPSECRET- PSECRET-TO")  // 8192 = 819 × 10 + 2
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    child.send("go")
    let after = child.readLine()
    let stderr = child.wait()
    #expect(after == nil, "the mapped page was still readable while LOCKED: \(after ?? "")")
    #expect(
      child.process.terminationReason == .uncaughtSignal, "child exited \(child.process.terminationStatus): \(stderr)")
    #expect(child.process.terminationStatus == SIGBUS)
    try fixture.control("unlock")
    try fixture.unmount()
  }

  @Test("class A: pages cached during GRACE are dropped when grace ends")
  func graceEndDropsCache() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "1s"])
    try makeFile(fixture, "Documents/secret", .A, Self.secret)
    let (fd, opened) = Sys2.open(fixture.path("Documents/secret"), O_RDONLY)
    try #require(opened == .ok)
    #expect(Sys2.pread(fd, count: 10_000).1 == Self.secret)
    try fixture.control("lock")
    #expect(fixture.deviceState == "GRACE")
    #expect(Sys2.pread(fd, count: 10_000).1 == Self.secret, "readable during GRACE")
    try fixture.waitForState("LOCKED")
    // LOCKED shows only once the cached pages are gone.
    #expect(
      Sys2.pread(fd, count: 10_000).0 == .eperm, "the old descriptor still reads class-A content after grace ended")
    close(fd)
    try fixture.unmount()
  }

  @Test("class CX: cached pages are dropped when the inactivity timeout runs out")
  func cxTimeoutDropsCache() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0", "--cx-timeout", "1s"])
    try makeFile(fixture, "Documents/inactive", .CX, Self.secret)
    let (fd, opened) = Sys2.open(fixture.path("Documents/inactive"), O_RDONLY)
    try #require(opened == .ok)
    #expect(Sys2.pread(fd, count: 10_000).1 == Self.secret)
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    // CX while LOCKED before the timeout is like C.
    let status = try fixture.status()
    if status["cxExpired"] as? Bool == false {
      #expect(Sys2.pread(fd, count: 10_000).1 == Self.secret, "readable while LOCKED before the timeout")
    }
    try fixture.waitForCXExpiry()
    #expect(Sys2.pread(fd, count: 10_000).0 == .eperm, "the old descriptor still reads CX content after the timeout")
    #expect(Sys2.tryOpen(fixture.path("Documents/inactive"), O_RDONLY) == .eperm)
    close(fd)
    try fixture.unmount()
  }

  /// A file cannot become class A while LOCKED (A is closed then: EPERM, as Apple's
  /// filesystems answer), so no content cached under its old class is ever A's.
  @Test("a file cannot be changed to class A while LOCKED: its class and cached content stay C's")
  func reclassifiedWhileLocked() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0", "--no-passthrough"])
    try makeFile(fixture, "Documents/later-secret", .C, Self.secret)
    let (fd, opened) = Sys2.open(fixture.path("Documents/later-secret"), O_RDONLY)
    try #require(opened == .ok)
    #expect(Sys2.pread(fd, count: 10_000).1 == Self.secret)
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    #expect(Sys2.setxattr(fixture.path("Documents/later-secret"), ProtectionAttribute.protection, "complete") == EPERM)
    #expect(Sys2.protection(fixture.path("Documents/later-secret")) == "completeUntilFirstUserAuthentication")
    #expect(Sys2.pread(fd, count: 10_000).1 == Self.secret, "class C: readable while LOCKED")
    close(fd)
    try fixture.unmount()
  }
}

/// A thread that reads the mount's device-state attribute and then a class-A file, in a
/// loop, until the attribute reads LOCKED and a read after it was refused.
final class LockedReadProbe: @unchecked Sendable {
  private let done = DispatchSemaphore(value: 0)
  /// Reads that succeeded after the attribute had read LOCKED.
  private(set) var lateReads = 0

  init(fd: Int32, root: String) {
    Thread.detachNewThread { [self] in
      let deadline = Date().addingTimeInterval(10)
      while Date() < deadline {
        let locked = (try? Sys2.getxattr(root, "user.appbox.device-state").get()) == "LOCKED"
        let outcome = Sys2.pread(fd, count: 4096).0
        if locked {
          if outcome == .ok { lateReads += 1 } else { break }
        }
      }
      done.signal()
    }
  }

  /// Waits for the loop to end; the reads that got through after LOCKED showed.
  func waitForLockedRead() -> Int {
    done.wait()
    return lateReads
  }
}
