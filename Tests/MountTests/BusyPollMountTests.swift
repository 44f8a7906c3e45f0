import CPosixShim
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's busy polling on a real mount: `--busy-poll`, and what `appbox status` counts.
/// Polling is how the /dev/fuse reader waits, so these mounts use that transport whatever
/// the run's (over io_uring, /dev/fuse carries only forgets: TransportTests).
@Suite("Busy polling", .needsFUSE, .timeLimit(.minutes(10)))
struct BusyPollMountTests {
  /// Creates, stats and removes `count` files: requests that come back to back.
  static func churn(_ fixture: MountFixture, count: Int) throws {
    for index in 0..<count {
      let path = fixture.path("Documents/f\(index)")
      try writeFile(path, [])
      _ = try statPath(path)
      try check(unlink(path), "unlink \(path)")
    }
  }

  static func busyPoll(_ fixture: MountFixture) throws -> (microseconds: Int64, polled: Int64, waited: Int64) {
    let status = try Quota.status(fixture.mountpoint)
    return (
      Quota.number(status, "busyPoll.microseconds"), Quota.number(status, "busyPoll.polled"),
      Quota.number(status, "busyPoll.waited")
    )
  }

  @Test("by default the window is 30 µs (with more than one CPU); back-to-back requests are found by polling")
  func pollsBackToBackRequests() throws {
    let fixture = try MountFixture.unlocked(["--transport", "dev-fuse"])
    #expect(try Self.busyPoll(fixture).microseconds == (cposix_available_cpus() > 1 ? 30 : 0))
    try fixture.unmount()

    // The largest window, so that polling engages even on a slow machine.
    let wide = try MountFixture.unlocked(["--transport", "dev-fuse", "--busy-poll", "1000"])
    try Self.churn(wide, count: 300)
    let counts = try Self.busyPoll(wide)
    #expect(counts.microseconds == 1000)
    #expect(counts.polled > 0, "no request found by polling: \(counts)")
    #expect(counts.polled + counts.waited >= 300 * 3, "fewer requests than the program sent: \(counts)")
    // The human status shows the same counter; forgets the kernel sends late may have
    // been polled for since.
    let status = try Command.run(Command.appbox, ["status", wide.mountpoint])
    let shown = status.output.split(separator: "\n").first { $0.contains("busy poll:   1000 µs, ") }
      .flatMap { Int64($0.split(separator: ",")[1].split(separator: " ")[0]) }
    #expect(shown.map { $0 >= counts.polled } == true, "\(status.output)")
    try wide.unmount()
  }

  @Test("a daemon that may run on one CPU only does not poll by default")
  func offOnASingleCPU() throws {
    let directories = try SandboxDirectories()
    let mount = try Command.run(
      "/usr/bin/taskset",
      ["-c", "0", Command.appbox, "mount", "--unlocked", "--backing", directories.backing, directories.mountpoint])
    #expect(mount.status == 0, "appbox mount under taskset: \(mount.error)")
    guard mount.status == 0 else { return }
    #expect(Quota.number(try Quota.status(directories.mountpoint), "busyPoll.microseconds") == 0)
    let unmount = try Command.run(Command.appbox, ["unmount", directories.mountpoint])
    #expect(unmount.status == 0, "\(unmount.error)")
  }

  @Test("--busy-poll 0 never polls")
  func zeroTurnsPollingOff() throws {
    let fixture = try MountFixture.unlocked(["--transport", "dev-fuse", "--busy-poll", "0"])
    try Self.churn(fixture, count: 100)
    let counts = try Self.busyPoll(fixture)
    #expect(counts.microseconds == 0)
    #expect(counts.polled == 0)
    #expect(counts.waited > 0)
    let status = try Command.run(Command.appbox, ["status", fixture.mountpoint])
    #expect(status.output.contains("busy poll:   off"), "\(status.output)")
    try fixture.unmount()
  }
}
