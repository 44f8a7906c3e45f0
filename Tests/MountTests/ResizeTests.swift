import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `appbox resize` and `appbox pressure`: the capacity of a live mount.
@Suite("Resizing a live mount", .needsFUSE, .timeLimit(.minutes(10)))
struct ResizeTests {
  let mib = Quota.mebibyte

  /// A mount of 20 MiB holding 4 MiB in Documents, tmp/t0, tmp/t1 and Caches c0…c5 of
  /// 1 MiB each (c0 used longest ago), and tmp/held and Caches/held of 1 MiB, held open
  /// by the returned descriptors.
  func filledMount() throws -> (MountFixture, [Int32]) {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    try Quota.writeFile(fixture.path("Documents/doc"), count: 4 * mib, seed: 99)
    for index in 0..<2 { try Quota.writeFile(fixture.path("tmp/t\(index)"), count: mib, seed: UInt64(10 + index)) }
    for index in 0..<6 {
      try Quota.writeFile(fixture.path("Library/Caches/c\(index)"), count: mib, seed: UInt64(20 + index))
    }
    try Quota.writeFile(fixture.path("tmp/held"), count: mib, seed: 30)
    try Quota.writeFile(fixture.path("Library/Caches/held"), count: mib, seed: 31)
    #expect(Quota.waitForReleases(fixture))
    for index in 0..<6 { try Quota.use(fixture.path("Library/Caches/c\(index)")) }
    let held = ["tmp/held", "Library/Caches/held"].map { open(fixture.path($0), O_RDONLY | O_CLOEXEC) }
    #expect(held.allSatisfy { $0 >= 0 })
    #expect(waitForHeldOnly(fixture))
    return (fixture, held)
  }

  /// Waits until the daemon holds only the two held files' handles.
  func waitForHeldOnly(_ fixture: MountFixture) -> Bool {
    fixture.waitUntil { fixture.openFileHandles().count == 2 }
  }

  @Test(
    "shrinking purges tmp, then Caches least recently used first, down to the new capacity; then ENOSPC; growing lets writes through"
  )
  func shrinkThenGrow() throws {
    let (fixture, held) = try filledMount()
    let before = Quota.number(try Quota.status(fixture.mountpoint), "used")
    #expect(before > 12 * Int64(mib))

    let shrink = try Experiment.resize(fixture.mountpoint, "9M")
    #expect(shrink.status == 0, "\(shrink.error)")
    #expect(shrink.output.contains("20 MiB → 9 MiB, purged "), "\(shrink.output)")
    let capacity: Int64 = 9 << 20
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "capacity") == capacity)
    #expect(Quota.number(status, "used") <= capacity)
    #expect(Experiment.capacityAttribute(fixture.mountpoint) == capacity)
    // tmp first, then Caches from the least recently used, only as far as needed.
    let purged = try Quota.purgedPaths(fixture.mountpoint, reason: "shrink")
    try #require(purged.count >= 3, "\(purged)")
    #expect(Array(purged.prefix(2)) == ["tmp/t0", "tmp/t1"], "\(purged)")
    #expect(Array(purged.dropFirst(2)) == (0..<(purged.count - 2)).map { "Library/Caches/c\($0)" }, "\(purged)")
    #expect(Quota.exists(fixture.path("Library/Caches/c5")), "purged no further than needed: \(purged)")
    #expect(Quota.statError(fixture.path("tmp/t0")) == ENOENT)
    // Open files survive.
    #expect(Quota.matches(fixture.path("tmp/held"), pattern(mib, seed: 30)))
    #expect(Quota.matches(fixture.path("Library/Caches/held"), pattern(mib, seed: 31)))
    let changes = try Experiment.events(fixture.mountpoint, type: "capacity")
    #expect(changes.count == 1)
    #expect(Experiment.number(changes[0], "from") == Double(20 << 20))
    #expect(Experiment.number(changes[0], "to") == Double(capacity))
    #expect(changes.first?["reason"] as? String == "resize")
    try Quota.expectBooksMatch(fixture, capacity: capacity)

    // A write that does not fit purges the rest of Caches (never the held files), then ENOSPC.
    let (written, error) = Experiment.writeUntilFull(fixture.path("Documents/big"), count: 8 * mib)
    #expect(error == ENOSPC, "wrote \(written) bytes, errno \(error)")
    #expect(written < 8 * mib)
    // A purge that made room for a write tells the kernel right after it (not from the
    // request thread), so the name may stay cached for a moment.
    #expect(Quota.poll { Quota.statError(fixture.path("Library/Caches/c5")) == ENOENT })
    #expect(Quota.matches(fixture.path("Library/Caches/held"), pattern(mib, seed: 31)))
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "noSpaceRefusals") >= 1)
    #expect(waitForHeldOnly(fixture))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "used") <= capacity)

    // Growing frees room at once.
    let grow = try Experiment.resize(fixture.mountpoint, "24M")
    #expect(grow.status == 0, "\(grow.error)")
    #expect(Experiment.writeUntilFull(fixture.path("Documents/big"), count: 8 * mib) == (8 * mib, 0))
    #expect(Experiment.capacityAttribute(fixture.mountpoint) == 24 << 20)
    #expect(try Experiment.events(fixture.mountpoint, type: "capacity").count == 2)
    for fd in held { close(fd) }
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: 24 << 20)
    try fixture.unmount()
  }

  @Test("bad capacities exit 65, bad schedules 65 with their line, and change nothing; another user gets 77")
  func refusals() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    chmod(fixture.root, 0o755)  // others reach the mountpoint; the control channel stops them
    for value in ["512K", "0", "ten", "-5M", "99999999999T"] {
      let result = try Experiment.resize(fixture.mountpoint, value)
      #expect(result.status == 65, "--capacity \(value): \(result.status) \(result.error)")
      #expect(result.error.contains("--capacity \(value)"), "\(result.error)")
    }
    #expect(try Command.run(Command.appbox, ["resize", fixture.mountpoint]).status == 64)
    let schedule = fixture.root + "/bad-schedule"
    try "0s 10M\n\n5s 512K\n".write(toFile: schedule, atomically: true, encoding: .utf8)
    let bad = try Command.run(Command.appbox, ["pressure", fixture.mountpoint, "--schedule", schedule])
    #expect(bad.status == 65, "\(bad.status) \(bad.error)")
    #expect(bad.error.contains("line 3"), "\(bad.error)")
    let missing = try Command.run(
      Command.appbox, ["pressure", fixture.mountpoint, "--schedule", fixture.root + "/none"])
    #expect(missing.status == 66, "\(missing.status) \(missing.error)")

    let good = fixture.root + "/schedule"
    try "0s 8M\n".write(toFile: good, atomically: true, encoding: .utf8)
    chmod(good, 0o644)
    for arguments in [
      ["resize", fixture.mountpoint, "--capacity", "8M"], ["pressure", fixture.mountpoint, "--schedule", good],
    ] {
      let result = try OtherUser.run(65534, [Command.appbox] + arguments)
      #expect(result.status == 77, "\(arguments[0]) as nobody: \(result.status) \(result.error)")
    }
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "capacity") == 20 << 20)
    #expect(try Experiment.events(fixture.mountpoint, type: "capacity").isEmpty)
    try fixture.unmount()
  }

  @Test("Ctrl-C stops a schedule: no later step runs")
  func interrupted() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    let file = fixture.root + "/schedule"
    try "0s 16M\n1h 2M\n".write(toFile: file, atomically: true, encoding: .utf8)
    let pressure = Process()
    pressure.executableURL = URL(fileURLWithPath: Command.appbox)
    pressure.arguments = ["pressure", fixture.mountpoint, "--schedule", file]
    pressure.standardOutput = FileHandle.nullDevice
    try pressure.run()
    defer {
      if pressure.isRunning { kill(pressure.processIdentifier, SIGKILL) }  // a failure below
    }
    #expect(try Experiment.events(fixture.mountpoint, type: "capacity", atLeast: 1).count == 1)
    kill(pressure.processIdentifier, SIGINT)
    #expect(Quota.poll { !pressure.isRunning }, "appbox pressure did not stop")
    if !pressure.isRunning {
      #expect(pressure.terminationReason == .uncaughtSignal && pressure.terminationStatus == SIGINT)
    }
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "capacity") == 16 << 20)
    #expect(try Experiment.events(fixture.mountpoint, type: "capacity").count == 1)
    try fixture.unmount()
  }

  @Test("a schedule shrinks and grows the capacity at its times: purges and ENOSPC while small, used == du")
  func schedule() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    for index in 0..<10 {
      try Quota.writeFile(fixture.path("Library/Caches/c\(index)"), count: mib, seed: UInt64(index + 1))
    }
    #expect(Quota.waitForReleases(fixture))
    let file = fixture.root + "/schedule"
    try """
    # start, squeeze, give some back
    0s    100%
    1s    6M
    5s    50%
    """.write(toFile: file, atomically: true, encoding: .utf8)
    let pressure = Process()
    pressure.executableURL = URL(fileURLWithPath: Command.appbox)
    pressure.arguments = ["pressure", fixture.mountpoint, "--schedule", file]
    pressure.standardOutput = FileHandle.nullDevice
    try pressure.run()
    defer {
      if pressure.isRunning { kill(pressure.processIdentifier, SIGKILL) }  // a failed requirement below
    }

    // While squeezed: purged down to 6 MiB, and a write that does not fit is ENOSPC.
    let squeezed = try Experiment.events(fixture.mountpoint, type: "capacity", atLeast: 2)
    try #require(squeezed.count == 2, "\(squeezed)")
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "used") <= 6 << 20)
    try Quota.expectBooksMatch(fixture, capacity: 6 << 20)
    let (written, error) = Experiment.writeUntilFull(fixture.path("Documents/big"), count: 8 * mib)
    let refused = Date().timeIntervalSince1970
    #expect(error == ENOSPC && written < 6 * mib, "wrote \(written), errno \(error)")
    #expect(unlink(fixture.path("Documents/big")) == 0)

    #expect(Quota.poll(seconds: 30) { !pressure.isRunning }, "appbox pressure did not finish")
    #expect(pressure.terminationStatus == 0)
    let changes = try Experiment.events(fixture.mountpoint, type: "capacity")
    try #require(changes.count == 3, "\(changes)")
    #expect(changes.map { $0["reason"] as? String } == ["schedule", "schedule", "schedule"])
    let targets: [Double] = changes.map { Experiment.number($0, "to") }
    let expected: [Double] = [20, 6, 10].map { Double($0 << 20) }
    #expect(targets == expected)
    let times = changes.map { Experiment.number($0, "time") }
    // Each step at its time after the first, within a tolerance for a loaded machine.
    #expect(abs(times[1] - times[0] - 1) < 0.5, "\(times)")
    #expect(abs(times[2] - times[0] - 5) < 0.5, "\(times)")
    #expect(refused < times[2], "the ENOSPC came while the capacity was 6 MiB")
    let purges = try Quota.events(fixture.mountpoint).filter { $0["reason"] as? String == "shrink" }
    #expect(purges.count >= 4, "\(purges.count) purges")
    let purgeTimes: [Double] = purges.map { Experiment.number($0, "time") }
    #expect(purgeTimes.allSatisfy { $0 >= times[1] && $0 < times[2] }, "\(purgeTimes) vs \(times)")
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: 10 << 20)
    // The room the last step gave back takes writes.
    #expect(Experiment.writeUntilFull(fixture.path("Documents/after"), count: 3 * mib) == (3 * mib, 0))
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: 10 << 20)
    try fixture.unmount()
  }
}
