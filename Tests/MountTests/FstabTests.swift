import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Mounting as other FUSE filesystems mount: `mount -t fuse…` and an `/etc/fstab` line,
/// through mount.fuse3, which runs `appbox SOURCE MOUNTPOINT -o OPTIONS` (here with the
/// program named in the source, `PROGRAM#SOURCE`, as `fuse.appbox` would find `appbox`
/// only on the system's PATH).
@Suite("mount -t and fstab", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct FstabTests {
  @Test(
    "mount -t fuse with AppBox's options as -o: capacity, grace, state, default class, nonempty and fsname take effect")
  func mountDashT() throws {
    let directories = try SandboxDirectories()
    // nonempty is AppBox's (libfuse 3 refuses it): the mountpoint's entry is hidden, not lost.
    try writeFile(directories.mountpoint + "/below", bytes("below"))
    let mounted = try Command.run(
      "/bin/mount",
      [
        "-t", "fuse", "\(Command.appbox)#\(directories.backing)", directories.mountpoint, "-o",
        "capacity=64M,grace=0,unlocked,default_protection=none,noatime,nonempty,fsname=app-fstab",
      ])
    try #require(mounted.status == 0, "mount -t fuse: \(mounted.error)")
    defer { _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint]) }
    let status = try Quota.status(directories.mountpoint)
    #expect(Quota.number(status, "capacity") == 64 << 20, "\(status)")
    #expect(status["state"] as? String == "UNLOCKED", "\(status)")
    let file = directories.mountpoint + "/Documents/new"
    try writeFile(file, bytes("x"))
    #expect(Sys2.protection(file) == "none")
    let line = MountFixture.mountTable().split(separator: "\n").first { $0.contains(" \(directories.mountpoint) ") }
    #expect(line?.contains("noatime") == true, "\(line ?? "no mount line")")
    #expect(line?.contains(" fuse.appbox app-fstab ") == true, "the source: \(line ?? "no mount line")")
    let unmounted = try Command.run(Command.appbox, ["unmount", directories.mountpoint])
    #expect(unmounted.status == 0, "\(unmounted.error)")
    #expect(try readFile(directories.mountpoint + "/below") == bytes("below"))
  }

  @Test("an fstab line mounts with mount -T FILE MOUNTPOINT; a bad value fails and mounts nothing")
  func fstabLine() throws {
    let directories = try SandboxDirectories()
    let fstab = directories.root + "/fstab"
    let line =
      "\(Command.appbox)#\(directories.backing) \(directories.mountpoint) fuse capacity=32M,purge_at=90%,noauto 0 0\n"
    try line.write(toFile: fstab, atomically: true, encoding: .utf8)
    let mounted = try Command.run("/bin/mount", ["-T", fstab, directories.mountpoint])
    try #require(mounted.status == 0, "mount -T: \(mounted.error)")
    let status = try Quota.status(directories.mountpoint)
    #expect(Quota.number(status, "capacity") == 32 << 20, "\(status)")
    #expect(status["state"] as? String == "UNLOCKED" || status["state"] as? String == "BFU", "\(status)")
    let unmounted = try Command.run(Command.appbox, ["unmount", directories.mountpoint])
    #expect(unmounted.status == 0, "\(unmounted.error)")

    let bad = try Command.run(
      "/bin/mount",
      ["-t", "fuse", "\(Command.appbox)#\(directories.backing)", directories.mountpoint, "-o", "capacity=lots"])
    #expect(bad.status != 0)
    #expect(bad.error.contains("capacity"), "\(bad.error)")
    #expect(!MountFixture.isMounted(directories.mountpoint))
  }

  @Test("appbox mount --fstab prints a line that mounts what its options ask for")
  func printedLine() throws {
    let directories = try SandboxDirectories()
    let printed = try Command.run(
      Command.appbox,
      [
        "mount", "--fstab", "--backing", directories.backing, "--capacity", "48M", "--bfu", "-o", "fsname=fstab-line",
        directories.mountpoint,
      ])
    try #require(printed.status == 0, "\(printed.error)")
    #expect(!MountFixture.isMounted(directories.mountpoint), "--fstab mounted")
    var fields = printed.output.trimmingCharacters(in: .newlines).split(separator: " ").map(String.init)
    try #require(fields.count == 6, "\(printed.output)")
    #expect(fields[0] == directories.backing && fields[1] == directories.mountpoint && fields[2] == "fuse.appbox")
    #expect(fields[3] == "capacity=48M,bfu,fsname=fstab-line", "\(fields[3])")
    // mount.fuse3 finds fuse.appbox's program on the system's PATH; here it is named in the source.
    fields[0] = "\(Command.appbox)#\(fields[0])"
    fields[2] = "fuse"
    let fstab = directories.root + "/fstab"
    try (fields.joined(separator: " ") + "\n").write(toFile: fstab, atomically: true, encoding: .utf8)
    let mounted = try Command.run("/bin/mount", ["-T", fstab, directories.mountpoint])
    try #require(mounted.status == 0, "mount -T: \(mounted.error)")
    let status = try Quota.status(directories.mountpoint)
    #expect(Quota.number(status, "capacity") == 48 << 20, "\(status)")
    #expect(status["state"] as? String == "BFU", "\(status)")
    let line = MountFixture.mountTable().split(separator: "\n").first { $0.contains(" \(directories.mountpoint) ") }
    #expect(line?.contains(" fuse.appbox fstab-line ") == true, "\(line ?? "no mount line")")
    #expect(try Command.run(Command.appbox, ["unmount", directories.mountpoint]).status == 0)
  }
}
