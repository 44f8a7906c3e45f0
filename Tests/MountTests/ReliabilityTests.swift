import Foundation
import Posix
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon killed with SIGKILL: the mount fails cleanly, and a remount shows the data.
@Suite("Reliability", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct ReliabilityTests {
  @Test("after kill -9 of the daemon: ENOTCONN, appbox unmount cleans up, a remount shows data and attributes")
  func killAndRemount() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/kept"), bytes("kept"))
    #expect(setXattr(fixture.path("Documents/kept"), "com.apple.MobileBackup", [1]) == 0)
    #expect(mkdir(fixture.path("Library/Application Support/db"), 0o700) == 0)
    let fd = try openFile(fixture.path("Library/Application Support/db/wal"), O_WRONLY | O_CREAT, 0o600)
    try writeAll(fd, pattern(100_000, seed: 5))
    #expect(fsync(fd) == 0)
    close(fd)
    let pid = try #require(fixture.daemonPID)
    #expect(kill(pid, SIGKILL) == 0)
    #expect(Spawn.waitForExit(pid, milliseconds: 10_000), "daemon did not die")
    var st = stat()
    // The kernel lets go of the connection when the last reference to the dead daemon's
    // device goes, which can come just after the exit the wait saw (over io_uring: when
    // it tears the rings down). Until then a stat may still be answered from the
    // kernel's cache, or end with ECONNABORTED (a request the abort ended) or ECANCELED
    // (one a dead worker's ring could no longer deliver). ENOTCONN follows.
    let first = errnoOf(stat(fixture.path("Documents/kept"), &st))
    #expect([0, ENOTCONN, ECONNABORTED, ECANCELED].contains(first), "errno \(first)")
    #expect(fixture.waitUntil { errnoOf(stat(fixture.path("Documents/kept"), &st)) == ENOTCONN })
    let unmount = try Command.run(Command.appbox, ["unmount", fixture.mountpoint])
    #expect(unmount.status == 0, "\(unmount.error)")
    #expect(!MountFixture.isMounted(fixture.mountpoint))
    let mount = try Command.run(
      Command.appbox, ["mount", "--unlocked", "--backing", fixture.backing, fixture.mountpoint])
    try #require(mount.status == 0, "\(mount.error)")
    #expect(try readFile(fixture.path("Documents/kept")) == bytes("kept"))
    #expect(try getXattr(fixture.path("Documents/kept"), "com.apple.MobileBackup") == [1])
    #expect(try readFile(fixture.path("Library/Application Support/db/wal")) == pattern(100_000, seed: 5))
    #expect(try directoryNames(fixture.mountpoint) == ["Documents", "Library", "tmp"])
    #expect(try Command.run(Command.appbox, ["unmount", fixture.mountpoint]).status == 0)
    #expect(!MountFixture.isMounted(fixture.mountpoint))
  }
}
