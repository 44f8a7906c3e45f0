import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `appbox status --descriptors`: the daemon lists its own open descriptors, which the
/// tests' leak checks rely on where root may not read another process's `/proc/PID/fd`
/// (no CAP_SYS_PTRACE, as in a container, once the daemon served another user).
@Suite("Daemon descriptors", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct DaemonDescriptorsTests {
  @Test("status --descriptors lists a file held open, after the daemon served another user, and not after close")
  func heldFileListedThenReleased() throws {
    let fixture = try OwnershipTests.sharedMount()
    let name = "Documents/held"
    try writeFile(fixture.path(name), bytes("x"))
    try check(chmod(fixture.path(name), 0o644), "chmod")
    // A request served as uid 65534 changes the daemon's credentials for a while, after
    // which the kernel no longer lets a process without CAP_SYS_PTRACE read its fds.
    #expect(try OwnershipTests.asNobody("open(a).read()", fixture.path(name)) == "ok")
    let fd = open(fixture.path(name), O_RDONLY | O_CLOEXEC)
    try #require(fd >= 0, "open: \(errno)")
    let held = fixture.backingPath(name)
    let listed = fixture.waitUntil { fixture.openFileHandles().contains(held) }
    #expect(listed, "\(held) not among \(fixture.openFileHandles())")
    // The command prints the same list, and counts the inode references.
    let printed = try Command.run(Command.appbox, ["status", "--descriptors", fixture.mountpoint])
    #expect(printed.status == 0, "exited \(printed.status): \(printed.error)")
    let object = try JSONSerialization.jsonObject(with: Data(printed.output.utf8)) as? [String: Any]
    let targets = (object?["descriptors"] as? [[String: Any]])?.compactMap { $0["target"] as? String } ?? []
    #expect(targets.contains(held) && targets.contains("/dev/fuse"), "\(printed.output)")
    #expect((object?["inodeReferences"] as? Int ?? 0) > 0, "\(printed.output)")
    close(fd)
    #expect(fixture.waitUntil { !fixture.openFileHandles().contains(held) }, "\(fixture.openFileHandles())")
    try fixture.unmount()
  }

  @Test("status --descriptors: a usage error with --json (64), refused to another user (77)")
  func usageAndOwner() throws {
    let fixture = try OwnershipTests.sharedMount()
    let both = try Command.run(Command.appbox, ["status", "--json", "--descriptors", fixture.mountpoint])
    #expect(both.status == 64, "exited \(both.status): \(both.error)")
    let other = try OtherUser.run(
      OwnershipTests.nobody, [Command.appbox, "status", "--descriptors", fixture.mountpoint])
    #expect(other.status == 77, "exited \(other.status): \(other.error)\(other.output)")
    #expect(other.output.isEmpty, "\(other.output)")
    try fixture.unmount()
  }
}
