import Foundation
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The books after a crash: `kill -9` of the daemon mid-workload, then a remount of the
/// same backing directory.
@Suite("Quota after a crash", .needsFUSE, .timeLimit(.minutes(10)))
struct QuotaCrashTests {
  @Test("kill -9 during heavy writes; after remount used == du and closed files outside Caches/tmp are intact")
  func killNineThenRemount() throws {
    let directories = try SandboxDirectories(prefix: "appbox-crash")
    let backing = directories.backing
    let mountpoint = directories.mountpoint
    var mounted = false
    let capacity: Int64 = 24 << 20
    let arguments = ["mount", "--backing", backing, "--capacity", "24M", "--unlocked", mountpoint]
    let first = try Command.run(Command.appbox, arguments)
    #expect(first.status == 0, "mount: \(first.error)")
    mounted = MountFixture.isMounted(mountpoint)
    #expect(mounted)
    guard mounted, let pid = MountFixture.daemonPID(for: mountpoint) else { return }

    // Written and closed before the crash: these must survive byte for byte.
    var kept: [String: [UInt8]] = [:]
    try FileManager.default.createDirectory(
      atPath: mountpoint + "/Documents/notes", withIntermediateDirectories: true)
    for (index, name) in [
      "Documents/a.bin", "Documents/notes/b.txt", "Library/Application Support/state.json",
      "Library/Preferences/app.plist",
    ].enumerated() {
      kept[name] = try Quota.writeFile(
        mountpoint + "/" + name, count: 70_000 * (index + 1) + index, seed: UInt64(100 + index))
    }
    for (name, bytes) in kept { #expect(Quota.matches(mountpoint + "/" + name, bytes), "\(name) before the crash") }

    // Heavy writes in Caches (under pressure: 24M, so purges run) and Documents.
    let workload = Process()
    workload.executableURL = URL(fileURLWithPath: "/bin/bash")
    workload.arguments = [
      "-c",
      """
      m="$1"
      for i in $(seq 1 100000); do
        dd if=/dev/zero of="$m/Library/Caches/w$i" bs=64K count=16 status=none 2>/dev/null || exit 0
        dd if=/dev/zero of="$m/Documents/d$((i % 4))" bs=16K count=$((i % 7 + 1)) status=none 2>/dev/null || exit 0
        mkdir -p "$m/tmp/t$((i % 5))" 2>/dev/null && echo "$i" > "$m/tmp/t$((i % 5))/f$i" 2>/dev/null || exit 0
      done
      """,
      "workload", mountpoint,
    ]
    workload.standardOutput = FileHandle.nullDevice
    workload.standardError = FileHandle.nullDevice
    try workload.run()
    defer { if workload.isRunning { workload.terminate() } }
    // Kill once the workload has forced purges (the cache is beyond the capacity).
    let pressured = try Quota.poll(seconds: 60) {
      Quota.number(try Quota.status(mountpoint), "purges") >= 10
    }
    #expect(pressured, "workload never made the daemon purge")
    #expect(kill(pid, SIGKILL) == 0)
    #expect(Spawn.waitForExit(pid, milliseconds: 10_000))
    let lazy = try Command.run("/usr/bin/fusermount3", ["-uz", mountpoint])
    #expect(lazy.status == 0, "fusermount3 -uz: \(lazy.error)")
    #expect(Quota.poll { !workload.isRunning }, "workload still running after the mount died")

    // Remount the same backing directory: the scan makes the books exact again.
    let second = try Command.run(Command.appbox, arguments)
    #expect(second.status == 0, "remount: \(second.error)")
    mounted = MountFixture.isMounted(mountpoint)
    #expect(mounted)
    guard mounted else { return }
    let status = try Quota.status(mountpoint)
    let du = try Quota.du(backing)
    #expect(Quota.number(status, "used") == du, "used \(Quota.number(status, "used")) != du \(du)")
    #expect(Quota.number(status, "capacity") == capacity)
    let fs = try Quota.statfs(mountpoint)
    #expect(Int64(fs.f_bavail) == Quota.number(status, "free") / 4096)
    for (name, bytes) in kept {
      #expect(Quota.matches(mountpoint + "/" + name, bytes), "\(name) through the mount after the crash")
      #expect(Quota.matches(backing + "/" + name, bytes), "\(name) in the backing after the crash")
    }
    // Still works: a write under pressure purges rather than failing.
    let free = Int(Quota.number(status, "free"))
    try Quota.writeFile(mountpoint + "/Documents/after", count: free + (1 << 20), seed: 9)
    let unmount = try Command.run(Command.appbox, ["unmount", mountpoint])
    #expect(unmount.status == 0, "unmount: \(unmount.error)")
    mounted = MountFixture.isMounted(mountpoint)
    #expect(!mounted)
  }
}
