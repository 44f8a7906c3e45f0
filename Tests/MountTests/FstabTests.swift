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
  @Test("mount -t fuse with AppBox's options as -o: capacity, grace, state and default class take effect")
  func mountDashT() throws {
    let directories = try SandboxDirectories()
    let mounted = try Command.run(
      "/bin/mount",
      [
        "-t", "fuse", "\(Command.appbox)#\(directories.backing)", directories.mountpoint, "-o",
        "capacity=64M,grace=0,unlocked,default_protection=none,noatime",
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
    let unmounted = try Command.run(Command.appbox, ["unmount", directories.mountpoint])
    #expect(unmounted.status == 0, "\(unmounted.error)")
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
}
