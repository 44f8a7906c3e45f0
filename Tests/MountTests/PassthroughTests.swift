import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// FUSE passthrough: read-only opens served by the kernel from the backing file (set-ID
/// clearing for writers that join them: SetIDTests).
@Suite("Passthrough", .needsFUSE, .timeLimit(.minutes(10)))
struct PassthroughTests {
  /// Whether this kernel and this test's privileges give passthrough: Linux ≥ 6.9 built
  /// with CONFIG_FUSE_PASSTHROUGH (when the configuration is readable), a root daemon.
  static let expected: Bool = {
    var name = utsname()
    uname(&name)
    let release = withUnsafeBytes(of: name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    let version = release.split(separator: ".").prefix(2).compactMap { Int($0.prefix { $0.isNumber }) }
    guard version.count == 2, (version[0], version[1]) >= (6, 9), geteuid() == 0 else { return false }
    let config =
      (try? Command.run("/bin/sh", ["-c", "zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r)"]))?.output
      ?? ""
    return config.isEmpty || config.contains("CONFIG_FUSE_PASSTHROUGH=y")
  }()

  static func passthroughFiles(_ fixture: MountFixture) throws -> Int64 {
    Quota.number(try Quota.status(fixture.mountpoint), "passthroughFiles")
  }

  @Test("a read-only open of a class C file is served by passthrough, and counted while open")
  func readOnlyOpen() throws {
    let fixture = try MountFixture.unlocked()
    let content = pattern(3 << 20, seed: 11)
    try writeFile(fixture.path("Documents/data"), content)
    #expect(Quota.waitForReleases(fixture), "the writer's handle, released after close, would keep the file cached")
    let status = try Quota.status(fixture.mountpoint)
    #expect(status["passthrough"] as? Bool == Self.expected, "passthrough negotiated: \(status)")

    let fd = try openFile(fixture.path("Documents/data"), O_RDONLY)
    #expect(try Self.passthroughFiles(fixture) == (Self.expected ? 1 : 0))
    let second = try openFile(fixture.path("Documents/data"), O_RDONLY)
    #expect(try Self.passthroughFiles(fixture) == (Self.expected ? 1 : 0), "one backing file per inode")
    for offset in [0, 4095, 1 << 20, (3 << 20) - 10] {
      #expect(
        try readAt(fd, count: 8192, offset: off_t(offset)) == Array(content[offset..<min(offset + 8192, 3 << 20)]))
    }
    #expect(try readToEnd(second) == content)
    // mmap reads the backing pages too.
    let mapped = mmap(nil, 3 << 20, PROT_READ, MAP_SHARED, fd, 0)
    try #require(mapped != MAP_FAILED)
    #expect(Array(UnsafeRawBufferPointer(start: mapped, count: 3 << 20)) == content)
    munmap(mapped, 3 << 20)
    close(fd)
    close(second)
    #expect(Quota.waitForReleases(fixture))
    #expect(try Self.passthroughFiles(fixture) == 0)
    try fixture.unmount()
  }

  @Test("a file created read-only (O_CREAT | O_RDONLY, as lock files are) can be opened again while it is open")
  func readOnlyCreate() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/lock")
    let created = try openFile(path, O_RDONLY | O_CREAT)  // FUSE_CREATE: a passthrough handle if available
    #expect(try Self.passthroughFiles(fixture) == (Self.expected ? 1 : 0))
    // The kernel fails (EIO) an open that would mix passthrough and cached handles.
    let reader = try openFile(path, O_RDONLY)
    let writer = try openFile(path, O_WRONLY)
    #expect(write(writer, "lock", 4) == 4)
    #expect(try readAt(reader, count: 8, offset: 0) == Array("lock".utf8))
    #expect(try readAt(created, count: 8, offset: 0) == Array("lock".utf8))
    for fd in [created, reader, writer] { close(fd) }
    #expect(Quota.waitForReleases(fixture))
    #expect(try Self.passthroughFiles(fixture) == 0)
    try fixture.unmount()
  }

  @Test("a writer opening a file held open by passthrough joins it: the reader sees its bytes, the books match du")
  func writerJoins() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Library/Caches/shared")
    try writeFile(path, pattern(4096, seed: 1))
    #expect(Quota.waitForReleases(fixture))
    let reader = try openFile(path, O_RDONLY)
    #expect(try Self.passthroughFiles(fixture) == (Self.expected ? 1 : 0))
    let writer = try openFile(path, O_RDWR)
    let grown = pattern(2 << 20, seed: 2)
    try writeAll(writer, grown, at: 4096)
    #expect(try readAt(reader, count: 2 << 20, offset: 4096) == grown, "the reader sees the writer's bytes")
    #expect(try fstatFD(reader).st_size == 4096 + (2 << 20))
    close(writer)
    close(reader)
    #expect(Quota.waitForReleases(fixture))
    // Once closed, a new writer goes through the page cache and the quota again.
    let again = try openFile(path, O_WRONLY | O_APPEND)
    #expect(try Self.passthroughFiles(fixture) == 0)
    try writeAll(again, pattern(4096, seed: 3))
    close(again)
    #expect(Quota.waitForReleases(fixture))
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "used") == (try Quota.du(fixture.backing)), "used == du after a passthrough writer")
    try fixture.unmount()
  }

  @Test("class A files never use passthrough: a read through an old handle is refused once LOCKED")
  func classAStaysChecked() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    let path = fixture.path("Documents/secret")
    try writeFile(path, bytes("secret"))
    try #require(Sys2.setxattr(path, ProtectionAttribute.protection, TestClass.A.name) == 0)
    let fd = try openFile(path, O_RDONLY)
    #expect(try Self.passthroughFiles(fixture) == 0)
    #expect(try readAt(fd, count: 6, offset: 0) == bytes("secret"))
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    #expect(Sys2.pread(fd, count: 6).0 == .eperm)
    try fixture.control("unlock")
    close(fd)
    try fixture.unmount()
  }

  @Test(
    "a file open by passthrough becomes class A or CX as on a device; once its class closes, reads through that handle are refused (EPERM), and work again after the unlock",
    arguments: [TestClass.A, TestClass.CX])
  func reclassifyWhileOpen(_ newClass: TestClass) throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0", "--cx-timeout", "0"])
    let path = fixture.path("Documents/doc")
    let content = pattern(1 << 20, seed: 5)
    try writeFile(path, content)
    #expect(Quota.waitForReleases(fixture))
    let fd = try openFile(path, O_RDONLY)
    #expect(try Self.passthroughFiles(fixture) == (Self.expected ? 1 : 0))
    #expect(Sys2.setxattr(path, ProtectionAttribute.protection, newClass.name) == 0, "the class change is accepted")
    #expect(Sys2.protection(path) == newClass.name)
    #expect(try readAt(fd, count: 4096, offset: 0) == Array(content[..<4096]))
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "passthroughRefused") == 0)

    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    if newClass == .CX { try fixture.waitForCXExpiry() }
    #expect(Sys2.pread(fd, count: 4096, offset: 8192).0 == .eperm, "a read through the open handle")
    var offset: off_t = 0
    let sink = try openFile("/dev/null", O_WRONLY)
    defer { close(sink) }
    #expect(sendfile(sink, fd, &offset, 4096) == -1 && errno == EPERM, "sendfile from the open handle")
    #expect(try Self.passthroughFiles(fixture) == (Self.expected ? 1 : 0), "still the same handle")
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "passthroughRefused") == (Self.expected ? 1 : 0))

    try fixture.control("unlock")
    try fixture.waitForState("UNLOCKED")
    #expect(try readAt(fd, count: 4096, offset: 8192) == Array(content[8192..<12288]), "readable again")
    close(fd)
    try fixture.unmount()
  }

  @Test(
    "a passthrough handle closed while its reads are refused leaves nothing refused: after the unlock the file reads")
  func closedWhileRefused() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    let path = fixture.path("Documents/doc")
    try writeFile(path, bytes("doc"))
    #expect(Quota.waitForReleases(fixture))
    let fd = try openFile(path, O_RDONLY)
    #expect(Sys2.setxattr(path, ProtectionAttribute.protection, TestClass.A.name) == 0)
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    #expect(Sys2.pread(fd, count: 3).0 == .eperm)
    close(fd)
    #expect(Quota.waitForReleases(fixture))
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "passthroughRefused") == 0)
    try fixture.control("unlock")
    try fixture.waitForState("UNLOCKED")
    #expect(try readFile(path) == bytes("doc"), "through the mount")
    #expect(try readFile(fixture.backing + "/Documents/doc") == bytes("doc"), "in the backing directory")
    try fixture.unmount()
  }

  @Test(
    "a file stays armed for revocation after its passthrough handles close (a new open costs nothing), until the kernel forgets it"
  )
  func armedUntilForgotten() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/doc")
    try writeFile(path, bytes("doc"))
    #expect(Quota.waitForReleases(fixture))
    func armed() throws -> Int64 { Quota.number(try Quota.status(fixture.mountpoint), "passthroughArmed") }
    #expect(try armed() == 0)
    for _ in 0..<3 {
      let fd = try openFile(path, O_RDONLY)
      #expect(try readToEnd(fd) == bytes("doc"))
      close(fd)
    }
    #expect(Quota.waitForReleases(fixture))
    #expect(try armed() == (Self.expected ? 1 : 0), "armed once, and still after the last close")
    #expect(HandleTool.evict(fixture), "the kernel never forgot the nodes")
    #expect(try armed() == 0, "disarmed with its inode")
    try fixture.unmount()
  }

  @Test("--no-passthrough: read-only opens go through the daemon, and reclassifying them works")
  func switchedOff() throws {
    let fixture = try MountFixture.unlocked(["--no-passthrough"])
    let path = fixture.path("Documents/doc")
    try writeFile(path, bytes("doc"))
    #expect(Quota.waitForReleases(fixture))
    #expect(try Quota.status(fixture.mountpoint)["passthrough"] as? Bool == false)
    let fd = try openFile(path, O_RDONLY)
    #expect(try readToEnd(fd) == bytes("doc"))
    #expect(try Self.passthroughFiles(fixture) == 0)
    #expect(Sys2.setxattr(path, ProtectionAttribute.protection, TestClass.A.name) == 0)
    close(fd)
    try fixture.unmount()
  }
}
