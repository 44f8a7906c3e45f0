import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// One daemon per backing directory: a second mount of it is refused (75) with a message
/// naming the first, and the backing tree gets no lock file.
@Suite("Backing directory lock", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct BackingLockTests {
  @Test("a second mount of a mounted backing directory exits 75 naming the first; after its unmount it mounts")
  func secondMountRefused() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/a"), bytes("a"))
    let names = try directoryNames(fixture.backing)
    let other = try SandboxDirectories()
    let second = try Command.run(Command.appbox, ["mount", "--backing", fixture.backing, other.mountpoint])
    #expect(second.status == 75, "second mount: \(second.status) \(second.error)")
    #expect(second.error.contains(fixture.mountpoint), "the message names the other mount: \(second.error)")
    #expect(second.error.components(separatedBy: "\n").filter { !$0.isEmpty }.count == 1, "\(second.error)")
    #expect(!MountFixture.isMounted(other.mountpoint))
    let foreground = try Command.run(
      "/usr/bin/timeout",
      ["-s", "KILL", "20", Command.appbox, "mount", "--foreground", "--backing", fixture.backing, other.mountpoint])
    #expect(foreground.status == 75, "--foreground: \(foreground.status) \(foreground.error)")
    #expect(!MountFixture.isMounted(other.mountpoint))
    #expect(try directoryNames(fixture.backing) == names, "the backing tree changed")
    #expect(try readFile(fixture.path("Documents/a")) == bytes("a"))
    try fixture.unmount()

    let again = try Command.run(
      Command.appbox, ["mount", "--unlocked", "--backing", fixture.backing, other.mountpoint])
    #expect(again.status == 0, "\(again.error)")
    #expect(try readFile(other.mountpoint + "/Documents/a") == bytes("a"))
    #expect(try Command.run(Command.appbox, ["unmount", other.mountpoint]).status == 0)
  }
}
