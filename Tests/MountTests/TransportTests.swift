import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// How requests reach the daemon (`--transport`, `APPBOX_TRANSPORT`), and the request
/// counters `appbox status --json` shows. The whole suite runs once per transport
/// (scripts/test.sh): these tests check that each run is on the transport it asked for.
@Suite("Transport and request counters", .needsFUSE, .timeLimit(.minutes(5)))
struct TransportTests {
  /// The transport this run asked for (scripts/test.sh sets APPBOX_TRANSPORT per run);
  /// without it, the default: io_uring.
  static let requested =
    ProcessInfo.processInfo.environment["APPBOX_TRANSPORT"].flatMap { $0.isEmpty ? nil : $0 }
    ?? "io-uring"

  /// Whether the kernel's host-wide switch for FUSE over io_uring is on.
  static var uringSwitchOn: Bool {
    let text = (try? String(contentsOfFile: "/sys/module/fuse/parameters/enable_uring", encoding: .utf8)) ?? ""
    return text.hasPrefix("Y") || text.hasPrefix("1")
  }

  /// The transport this run's mounts use: the one asked for when it was asked for
  /// explicitly (a fallback then fails the run); the default's, io_uring, only where the
  /// kernel's switch is on.
  static var expected: String {
    if ProcessInfo.processInfo.environment["APPBOX_TRANSPORT"].map({ !$0.isEmpty }) == true { return requested }
    return uringSwitchOn ? "io-uring" : "dev-fuse"
  }

  /// The kernel's ring queues: one per possible CPU ("0-1" in sysfs).
  static var possibleCPUs: Int64 {
    let text = (try? String(contentsOfFile: "/sys/devices/system/cpu/possible", encoding: .utf8)) ?? ""
    return text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").reduce(0) { total, range in
      let bounds = range.split(separator: "-").compactMap { Int64($0) }
      return total + (bounds.count == 2 ? bounds[1] - bounds[0] + 1 : 1)
    }
  }

  static func transport(_ status: [String: Any]) -> [String: Any] { status["transport"] as? [String: Any] ?? [:] }

  @Test("the mount uses the transport this run asked for, with no fallback")
  func transportInUse() throws {
    let fixture = try MountFixture.unlocked()
    let transport = Self.transport(try Quota.status(fixture.mountpoint))
    #expect(transport["requested"] as? String == Self.requested)
    #expect(
      transport["inUse"] as? String == Self.expected,
      "asked for \(Self.requested), the daemon uses \(transport["inUse"] ?? "?"): \(transport["fallbackReason"] ?? "no reason")"
    )
    if Self.expected == Self.requested {
      #expect(transport["fallbackReason"] is NSNull)
    } else {
      // The default fell back because the switch is off, and says so.
      #expect((transport["fallbackReason"] as? String)?.contains("enable_uring is 0") == true)
    }
    if Self.expected == "io-uring" {
      #expect(Quota.number(["t": transport], "t.queues") == Self.possibleCPUs)
      #expect(Quota.number(["t": transport], "t.workersPerQueue") == 4)
      // The payload buffer holds the largest request: a 1 MiB write.
      #expect(Quota.number(["t": transport], "t.bufferBytes") >= 1 << 20)
      // /dev/fuse carries only forgets and interrupts then: its reader does not poll.
      #expect(Quota.number(try Quota.status(fixture.mountpoint), "busyPoll.microseconds") == 0)
    }
    let human = try Command.run(Command.appbox, ["status", fixture.mountpoint])
    #expect(
      human.output.contains(Self.expected == "io-uring" ? "transport:   FUSE over io_uring" : "transport:   /dev/fuse"))
    try fixture.unmount()
  }

  @Test("each request is counted under its operation, on either transport")
  func requestsAreCounted() throws {
    let fixture = try MountFixture.unlocked()
    let before = try Quota.status(fixture.mountpoint)
    let files = 25
    for index in 0..<files {
      let path = fixture.path("Documents/counted\(index)")
      try writeFile(path, Array("x".utf8))
      try check(unlink(path), "unlink \(path)")
    }
    let after = try Quota.status(fixture.mountpoint)
    func delta(_ operation: String) -> Int64 {
      Quota.number(after, "requests.\(operation)") - max(0, Quota.number(before, "requests.\(operation)"))
    }
    // Each file: exactly one create, one write and one unlink reach the daemon.
    #expect(delta("create") == Int64(files))
    #expect(delta("write") == Int64(files))
    #expect(delta("unlink") == Int64(files))
    #expect(Quota.number(after, "requests.init") == 1)
    // Only operations that happened are listed.
    let requests = after["requests"] as? [String: Any] ?? [:]
    #expect(requests["symlink"] == nil)
    try fixture.unmount()
  }

  @Test("the forgets of unlinked files close the daemon's descriptors soon after; over io_uring, read in batches")
  func forgetsOfUnlinkedFiles() throws {
    let fixture = try MountFixture.unlocked()
    let files = 400
    for index in 0..<files { try writeFile(fixture.path("Documents/gone\(index)"), []) }
    let before = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(before, "nodes") >= Int64(files))
    for index in 0..<files { try check(unlink(fixture.path("Documents/gone\(index)")), "unlink gone\(index)") }
    // The kernel forgets each file just after its unlink; the daemon then closes its
    // descriptor, which frees the file: no node of a removed file stays held.
    let settled = fixture.waitUntil {
      ((try? Quota.number(Quota.status(fixture.mountpoint), "nodes")) ?? .max) <= Quota.number(before, "nodes")
        - Int64(files)
    }
    #expect(settled, "the daemon still holds nodes of removed files")
    let after = try Quota.status(fixture.mountpoint)
    let reads = ["forget", "batch_forget"].reduce(Int64(0)) { total, operation in
      total + Quota.number(after, "requests.\(operation)") - max(0, Quota.number(before, "requests.\(operation)"))
    }
    #expect(reads >= 1)
    print("forgetReads: \(reads) for \(files) files")
    // The transport this mount uses (a fallback, e.g. the host's switch turned off meanwhile,
    // is the test above's to report).
    if Self.transport(after)["inUse"] as? String == "io-uring" {
      // After a forget the /dev/fuse reader waits a moment before it reads again: the
      // forgets of the files unlinked meanwhile come in one read (a batch_forget).
      #expect(reads <= Int64(files / 2), "\(reads) reads of /dev/fuse for the forgets of \(files) files")
    }
    try fixture.unmount()
  }

  /// Whether a thread of this process may leave SCHED_IDLE (CAP_SYS_NICE or RLIMIT_NICE
  /// 20): root on a host may, a container's root usually not.
  static func mayLeaveIdlePolicy() throws -> Bool {
    try Command.run("/usr/bin/chrt", ["--idle", "0", "/usr/bin/chrt", "--other", "0", "/bin/true"]).status == 0
  }

  /// The CPUs this process may run on.
  static func allowedCPUs() throws -> [Int] {
    let run = try Command.run(
      "/usr/bin/python3", ["-c", "import os; print(*sorted(os.sched_getaffinity(0)))"])
    try #require(run.status == 0, "\(run.error)")
    return run.output.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
  }

  /// 2,000 appends of 4 bytes to `path` by one program, which moves to the next of `cpus`
  /// before each.
  static func appendFromCPUs(_ cpus: [Int], path: String) throws {
    let script = """
      import os, sys
      cpus = [int(c) for c in sys.argv[2].split(",")]
      fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
      for i in range(2000):
          os.sched_setaffinity(0, {cpus[i % len(cpus)]})
          os.write(fd, b"abcd")
      os.close(fd)
      """
    let run = try Command.run("/usr/bin/python3", ["-c", script, path, cpus.map(String.init).joined(separator: ",")])
    try #require(run.status == 0, "\(run.error)")
  }

  @Test("over io_uring, workers commit replies as SCHED_IDLE threads where allowed, not turned off, and programs move; status says which")
  func cpuHandoff() throws {
    func handoff(_ mountpoint: String) throws -> [String: Any] {
      try FileManager.default.createDirectory(atPath: mountpoint + "/Documents/made", withIntermediateDirectories: true)
      for index in 0..<50 { try Data([1]).write(to: URL(fileURLWithPath: mountpoint + "/Documents/made/\(index)")) }
      return Self.transport(try Quota.status(mountpoint))
    }
    func human(_ mountpoint: String) throws -> String { try Command.run(Command.appbox, ["status", mountpoint]).output }

    let fixture = try MountFixture.unlocked()
    if Self.expected == "io-uring", try Self.mayLeaveIdlePolicy() {
      // Only while programs move between CPUs: one that stays on its CPU gets none, one
      // that moves at every request (its next request comes on another CPU's queue) does.
      // First on the fresh mount, so that no earlier program's moves count.
      let cpus = try Self.allowedCPUs()
      try Self.appendFromCPUs([cpus[0]], path: fixture.path("Documents/stays"))
      let stayed = Quota.number(["t": Self.transport(try Quota.status(fixture.mountpoint))], "t.handoffs")
      #expect(stayed == 0, "a program on one CPU: \(stayed) replies handed off")
      if cpus.count > 1 {  // on one CPU there is nowhere to move
        try Self.appendFromCPUs(Array(cpus.prefix(2)), path: fixture.path("Documents/moves"))
        let moved = Quota.number(["t": Self.transport(try Quota.status(fixture.mountpoint))], "t.handoffs")
        #expect(moved > stayed, "a program moved at every request: no reply handed off")
      }
    }
    let plain = try handoff(fixture.mountpoint)
    if Self.expected == "dev-fuse" {
      // No ring workers: nothing to hand off, and status shows no handoff at all.
      #expect(plain["cpuHandoff"] as? Bool == false && plain["handoffOffReason"] is NSNull, "\(plain)")
      #expect(Quota.number(["t": plain], "t.handoffs") == 0)
      #expect(!(try human(fixture.mountpoint)).contains("CPU handoff"))
      try fixture.unmount()
      return
    }
    if try Self.mayLeaveIdlePolicy() {
      #expect(plain["cpuHandoff"] as? Bool == true, "\(plain)")
      #expect(plain["handoffOffReason"] is NSNull)
      #expect(try human(fixture.mountpoint).contains("CPU handoff: "))
    } else {
      #expect((plain["handoffOffReason"] as? String)?.contains("may not leave SCHED_IDLE") == true, "\(plain)")
    }
    try fixture.unmount()

    let off = try MountFixture.unlocked(["--no-cpu-handoff"])
    let turnedOff = try handoff(off.mountpoint)
    #expect(turnedOff["cpuHandoff"] as? Bool == false)
    #expect(Quota.number(["t": turnedOff], "t.handoffs") == 0)
    #expect(turnedOff["handoffOffReason"] as? String == "--no-cpu-handoff")
    #expect(try human(off.mountpoint).contains("CPU handoff: off (--no-cpu-handoff)"))
    try off.unmount()

    // Without CAP_SYS_NICE and with an RLIMIT_NICE of 0, a thread may not leave SCHED_IDLE:
    // no handoff, and the mount serves as usual.
    let directories = try SandboxDirectories()
    let mount = try Command.run(
      "/usr/bin/setpriv",
      [
        "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", "/usr/bin/prlimit", "--nice=0:0", Command.appbox, "mount",
        "--unlocked", "--backing", directories.backing, directories.mountpoint,
      ])
    try #require(mount.status == 0, "\(mount.error)")
    let refused = try handoff(directories.mountpoint)
    #expect(refused["inUse"] as? String == "io-uring")
    #expect(refused["cpuHandoff"] as? Bool == false)
    #expect((refused["handoffOffReason"] as? String)?.contains("may not leave SCHED_IDLE") == true, "\(refused)")
    #expect(FileManager.default.fileExists(atPath: directories.backing + "/Documents/made/49"))
    #expect(try Command.run(Command.appbox, ["unmount", directories.mountpoint]).status == 0)
    #expect(!MountFixture.isMounted(directories.mountpoint))
  }

  @Test("-o auto_unmount keeps /dev/fuse, and status says why")
  func autoUnmountKeepsDevFuse() throws {
    let fixture = try MountFixture.unlocked(["--transport", "io-uring", "-o", "auto_unmount"])
    let transport = Self.transport(try Quota.status(fixture.mountpoint))
    #expect(transport["requested"] as? String == "io-uring")
    #expect(transport["inUse"] as? String == "dev-fuse")
    #expect((transport["fallbackReason"] as? String)?.contains("auto_unmount") == true, "\(transport)")
    try fixture.unmount()
  }

  @Test("an unknown transport is refused with a clear error, from the option or the environment")
  func unknownTransportRefused() throws {
    let directories = try SandboxDirectories()
    let option = try Command.run(
      Command.appbox,
      ["mount", "--transport", "carrier-pigeon", "--backing", directories.backing, directories.mountpoint])
    #expect(option.status == 65)
    #expect(option.error.contains("--transport carrier-pigeon: use io-uring or dev-fuse"))
    var environment = ProcessInfo.processInfo.environment
    environment["APPBOX_TRANSPORT"] = "smoke-signals"
    let variable = try Command.run(
      Command.appbox, ["mount", "--backing", directories.backing, directories.mountpoint], environment: environment)
    #expect(variable.status == 65)
    #expect(variable.error.contains("APPBOX_TRANSPORT=smoke-signals: use io-uring or dev-fuse"))
    #expect(!MountFixture.isMounted(directories.mountpoint))
  }
}
