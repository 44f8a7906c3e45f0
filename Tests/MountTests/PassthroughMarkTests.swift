import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The fanotify marks that let a lock refuse passthrough reads, on files whose last link
/// is removed through a name other than the one the daemon holds: the kernel then drops
/// their marks (as git's loose objects, made under a temporary name and linked in place).
@Suite("Passthrough marks of removed files", .needsFUSE, .timeLimit(.minutes(10)))
struct PassthroughMarkTests {
  /// Makes `Documents/tmp` (which the daemon looks up, and holds, by that name), links it
  /// as `Documents/final` and removes `Documents/tmp`, as git makes an object.
  static func linkedInPlace(_ fixture: MountFixture, _ content: [UInt8]) throws -> String {
    try writeFile(fixture.path("Documents/tmp"), content)
    #expect(link(fixture.path("Documents/tmp"), fixture.path("Documents/final")) == 0)
    #expect(unlink(fixture.path("Documents/tmp")) == 0)
    #expect(Quota.waitForReleases(fixture))
    return fixture.path("Documents/final")
  }

  @Test("a removed file read by passthrough and forgotten is no internal error")
  func forgottenIsNoError() throws {
    let fixture = try MountFixture.unlocked()
    let path = try Self.linkedInPlace(fixture, pattern(8192, seed: 1))
    let fd = try openFile(path, O_RDONLY)
    #expect(try readToEnd(fd) == pattern(8192, seed: 1))
    close(fd)
    #expect(Quota.waitForReleases(fixture))
    #expect(
      Quota.number(try Quota.status(fixture.mountpoint), "passthroughArmed") == (PassthroughTests.expected ? 1 : 0))
    #expect(unlink(path) == 0)  // the last link: the kernel drops the mark
    #expect(fixture.waitUntil { Quota.number((try? Quota.status(fixture.mountpoint)) ?? [:], "passthroughArmed") == 0 })
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "internalErrors.total") == 0)
    try fixture.unmount()
  }

  @Test("a removed file still open by passthrough, whose class becomes A, is refused at the lock all the same")
  func removedAndReclassifiedIsRefused() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    let content = pattern(1 << 20, seed: 2)
    let path = try Self.linkedInPlace(fixture, content)
    let fd = try openFile(path, O_RDONLY)
    #expect(try readAt(fd, count: 4096, offset: 0) == Array(content[..<4096]))
    #expect(
      Quota.number(try Quota.status(fixture.mountpoint), "passthroughFiles") == (PassthroughTests.expected ? 1 : 0))
    #expect(unlink(path) == 0)  // the last link, while the program holds the file open
    #expect(
      Sys2.setxattr("/proc/self/fd/\(fd)", ProtectionAttribute.protection, TestClass.A.name) == 0,
      "the class change is accepted")
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    #expect(Sys2.pread(fd, count: 4096, offset: 8192).0 == .eperm, "a read through the open handle")
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "internalErrors.total") == 0)
    try fixture.control("unlock")
    try fixture.waitForState("UNLOCKED")
    #expect(try readAt(fd, count: 4096, offset: 8192) == Array(content[8192..<12288]), "readable again")
    close(fd)
    try fixture.unmount()
  }
}
