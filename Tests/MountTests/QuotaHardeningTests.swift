import CPosixShim
import Foundation
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The quota's bookkeeping where it used to leak: open files and purges racing, blocks
/// that were never charged (extended attributes, a failed fallocate, a writer joining
/// passthrough readers), and errors that were dropped.
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

  @Test("extended attributes' blocks are charged: 3,000-byte values in a 1M sandbox end in ENOSPC, used == du")
  func xattrBlocksAreCharged() throws {
    let fixture = try MountFixture.unlocked(["--capacity", "1M"])
    #expect(mkdir(fixture.path("Documents/x"), 0o755) == 0)
    let value = pattern(3000, seed: 5)
    var refused = 0
    for index in 0..<500 {
      let path = fixture.path("Documents/x/f\(index)")
      let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
      guard fd >= 0 else {
        refused += 1
        continue
      }
      close(fd)
      if setXattr(path, "user.big", value) == ENOSPC { refused += 1 }
    }
    #expect(refused > 0, "setxattr past the capacity is ENOSPC")
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: 1 << 20)
    let status = try Quota.status(fixture.mountpoint)
    #expect(try Quota.du(fixture.backing) <= 1 << 20, "\(status)")
    // After a remount (the scan counts what du counts) the sandbox is still within it.
    try fixture.unmount()
    let remount = try Command.run(
      Command.appbox, ["mount", "--unlocked", "--capacity", "1M", "--backing", fixture.backing, fixture.mountpoint])
    try #require(remount.status == 0, "remount: \(remount.error)")
    defer { _ = try? Command.run(Command.appbox, ["unmount", fixture.mountpoint]) }
    let remounted = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(remounted, "used") == (try Quota.du(fixture.backing)))
    #expect(Quota.number(remounted, "used") <= 1 << 20)
    // Removing them gives the blocks back.
    for index in 0..<500 { _ = cposix_removexattr(fixture.path("Documents/x/f\(index)"), "user.big") }
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "used") == (try Quota.du(fixture.backing)))
  }

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

  @Test("a fallocate that fails on a full backing filesystem leaves used == du")
  func failedFallocateIsCharged() throws {
    // A 16 MiB tmpfs (not a loop-mounted image: a container has no loop devices).
    var backing: String?
    let fixture = try MountFixture.unlocked(["--capacity", "64M"]) { path in
      _ = try Command.shell("mount -t tmpfs -o size=16m,mode=0755 appbox-small \(shellQuote(path))")
      backing = path
    }
    defer { if let backing { _ = try? Command.run("/usr/bin/umount", [backing]) } }
    let fd = try openFile(fixture.path("Documents/big"), O_RDWR | O_CREAT)
    let result = posix_fallocate(fd, 0, 40 << 20)
    #expect(result == ENOSPC, "posix_fallocate past the backing's space: \(result)")
    close(fd)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: 64 << 20)
    try fixture.unmount()
  }

  @Test("an O_TRUNC open that writes nothing gives the blocks back at once")
  func truncatingOpenIsMeasured() throws {
    let fixture = try MountFixture.unlocked(["--capacity", "20M"])
    try Quota.writeFile(fixture.path("Documents/t"), count: 1 << 20)
    #expect(Quota.waitForReleases(fixture))
    let fd = try openFile(fixture.path("Documents/t"), O_WRONLY | O_TRUNC)
    close(fd)
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: 20 << 20)
    try fixture.unmount()
  }

  // MARK: - Errors that must not be dropped

  @Test("a purge whose unlink fails puts the file back: a later purge takes it")
  func failedPurgeUnlinkPutsBack() throws {
    let fixture = try MountFixture.unlocked(["--capacity", "20M"])
    #expect(mkdir(fixture.path("Library/Caches/stuck"), 0o755) == 0)
    try Quota.writeFile(fixture.path("Library/Caches/stuck/a"), count: 100_000)
    #expect(Quota.waitForReleases(fixture))
    // A mountpoint cannot be unlinked (EBUSY): the file bound onto itself. (Not `chattr
    // +i`, which needs CAP_LINUX_IMMUTABLE, which a container lacks.)
    let file = shellQuote(fixture.backingPath("Library/Caches/stuck/a"))
    _ = try Command.shell("mount --bind \(file) \(file)")
    try Quota.purge(fixture.mountpoint, ["--domain", "caches", "--all"])
    #expect(Quota.exists(fixture.path("Library/Caches/stuck/a")))
    _ = try Command.shell("umount \(file)")
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "purgeable.caches") > 0, "still purgeable: \(status)")
    try Quota.purge(fixture.mountpoint, ["--domain", "caches", "--all"])
    #expect(Quota.statError(fixture.backingPath("Library/Caches/stuck/a")) == ENOENT)
    try Quota.expectBooksMatch(fixture, capacity: 20 << 20)
    try fixture.unmount()
  }

  @Test("a class that cannot be stored fails the create instead of leaving a file of the default class")
  func unstoredClassFailsCreate() throws {
    // A tmpfs with an inode limit charges user attributes to its inode space (Linux 6.6+):
    // 1 KiB per inode, and per attribute its value, its name and 40 bytes. It is brought
    // to where a new file fits but its class attribute does not. (No loop device needed.)
    var backing = ""
    let fixture = try MountFixture.unlocked(["--capacity", "64M"]) { path in
      _ = try Command.shell("mount -t tmpfs -o size=16m,nr_inodes=64,mode=0755 appbox-ispace \(shellQuote(path))")
      backing = path
    }
    defer { _ = try? Command.run("/usr/bin/umount", [backing]) }
    #expect(mkdir(fixture.path("Documents/secret"), 0o755) == 0)
    #expect(setXattr(fixture.path("Documents/secret"), "user.appbox.protection", Array("complete".utf8)) == 0)
    // Two files on the backing: one to measure the space left, one to take it up.
    let (gauge, pad) = (backing + "/Documents/gauge", backing + "/Documents/pad")
    try writeFile(gauge, [])
    try writeFile(pad, [])
    var fillers = 0
    while try Self.freeInodes(backing) > 4 {
      try writeFile(backing + "/Documents/filler\(fillers)", [])
      fillers += 1
    }
    let before = try Self.room(on: gauge)
    let first = open(fixture.path("Documents/secret/first"), O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
    try #require(first >= 0, "the first file: \(String(cString: strerror(errno)))")
    close(first)
    #expect(try getXattr(backing + "/Documents/secret/first", "user.appbox.inherited-protection") == bytes("complete"))
    let left = try Self.room(on: gauge)
    let cost = before - left  // one file with its class: the inode and the attribute
    #expect(cost > 1024 && cost < 1200, "\(cost)")
    // Leave cost - 1 bytes: the inode fits, its class does not.
    #expect(setXattr(pad, Self.gaugeName, [UInt8](repeating: 1, count: left - cost + 1)) == 0)
    let padded = try Self.room(on: gauge)
    let second = open(fixture.path("Documents/secret/second"), O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
    let error = errno
    if second >= 0 { close(second) }
    #expect(second == -1 && error == ENOSPC, "\(second): \(String(cString: strerror(error)))")
    #expect(access(backing + "/Documents/secret/second", F_OK) != 0, "the file is gone from the backing")
    #expect(fixture.waitUntil { (try? Self.room(on: gauge)) == padded }, "its inode was given back")
    try fixture.unmount()
  }

  /// The attribute whose largest settable value measures a tmpfs's inode space left.
  static let gaugeName = "user.gauge"

  /// The longest value of ``gaugeName`` that `path` can take now (set, then removed): the
  /// inode space left, less a constant.
  static func room(on path: String) throws -> Int {
    var (fits, fails) = (-1, 65_537)  // a value is at most 64 KiB
    while fails - fits > 1 {
      let middle = (fits + fails) / 2
      switch setXattr(path, gaugeName, [UInt8](repeating: 0, count: middle), flags: LinuxConstants.XATTR_CREATE) {
      case 0:
        try check(Libc.removexattr(path, gaugeName), "removexattr")
        fits = middle
      case ENOSPC: fails = middle
      case let other: throw FixtureError("setxattr \(path): \(String(cString: strerror(other)))")
      }
    }
    guard fits >= 0 else { throw FixtureError("no inode space left on \(path)") }
    return fits
  }

  /// Free inodes of the filesystem at `path` (a tmpfs counts whole KiB of inode space).
  static func freeInodes(_ path: String) throws -> UInt {
    var st = statvfs()
    try check(statvfs(path, &st), "statvfs")
    return UInt(st.f_ffree)
  }

  @Test("a daemon that cannot switch credentials refuses a create instead of making the file its own")
  func credentialSwitchFailureRefuses() throws {
    let directories = try SandboxDirectories()
    _ = try Command.shell("chmod 755 \(shellQuote(directories.root))")
    // setpriv (util-linux) drops CAP_SETUID and CAP_SETGID from the bounding set: the
    // daemon still runs as uid 0, but its credential switches fail.
    let mount = try Command.run(
      "/usr/bin/setpriv",
      [
        "--bounding-set=-setuid,-setgid", "--inh-caps=-setuid,-setgid", Command.appbox, "mount", "--unlocked",
        "--backing", directories.backing, "-o", "allow_other", directories.mountpoint,
      ])
    try #require(mount.status == 0, "mount: \(mount.error)")
    defer { _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint]) }
    _ = try Command.shell("chmod 1777 \(shellQuote(directories.mountpoint + "/tmp"))")
    let result = try runAsNobody("touch \(shellQuote(directories.mountpoint + "/tmp/mine"))")
    var st = stat()
    if lstat(directories.backing + "/tmp/mine", &st) == 0 {
      Issue.record("created as uid \(st.st_uid), not refused (touch: \(result.status))")
    } else {
      #expect(result.status != 0)
    }
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
