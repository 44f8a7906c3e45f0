import Foundation
import Posix
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The barrier between a program under `appbox run` and the device: the daemon refuses
/// lock, unlock, purge and resize from the run's program and its descendants (orphans
/// included) unless the run allows device control, and answers everyone else.
@Suite("device-control barrier", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct DeviceControlBarrierTests {
  /// A shell snippet's output under `appbox run OPTIONS MOUNTPOINT`; `$APPBOX` and `$M`
  /// name the binary and the mountpoint inside it.
  static func run(_ fixture: MountFixture, _ options: [String] = [], script: String) throws -> CommandResult {
    try Command.run(
      Command.appbox,
      ["run"] + options + [
        fixture.mountpoint, "--", "/bin/sh", "-c", "APPBOX='\(Command.appbox)'; M='\(fixture.mountpoint)'; " + script,
      ])
  }

  /// The mount's capacity, from its status.
  static func capacity(_ fixture: MountFixture) throws -> Int64 {
    Quota.number(try Quota.status(fixture.mountpoint), "capacity")
  }

  @Test("without --allow-device-control the program's lock, unlock, purge and resize are refused (77); status works")
  func refusedWithoutFlag() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Library/Caches/c"), pattern(5000, seed: 1))
    let capacity = try Self.capacity(fixture)
    let result = try Self.run(
      fixture,
      script: #"""
        "$APPBOX" lock "$M"; echo "lock=$?"
        "$APPBOX" unlock "$M"; echo "unlock=$?"
        "$APPBOX" purge "$M" --domain caches --all; echo "purge=$?"
        "$APPBOX" resize "$M" --capacity 1G; echo "resize=$?"
        "$APPBOX" status "$M" >/dev/null; echo "status=$?"
        "$APPBOX" events "$M" >/dev/null; echo "events=$?"
        """#)
    #expect(result.status == 0)
    #expect(
      RunCommandTests.lines(result.output) == [
        "lock": "77", "unlock": "77", "purge": "77", "resize": "77", "status": "0", "events": "0",
      ])
    #expect(result.error.contains("without --allow-device-control"), "\(result.error)")
    #expect(fixture.deviceState == "UNLOCKED")
    #expect(try statPath(fixture.backingPath("Library/Caches/c")).st_size == 5000, "nothing purged")
    #expect(try Self.capacity(fixture) == capacity)
    #expect(try Experiment.events(fixture.mountpoint, type: "state").isEmpty)
    try fixture.unmount()
  }

  @Test("a double-forked orphan of the program is refused, during the run and after it ended")
  func orphansRefused() throws {
    let fixture = try MountFixture.unlocked()
    // The subshell exits at once: its background child is orphaned (re-parented to
    // appbox run, the run's subreaper) before it locks.
    let during = try Self.run(
      fixture,
      script: #"""
        ( ( "$APPBOX" lock "$M"; echo $? > "$M/Documents/during" ) & )
        while [ ! -s "$M/Documents/during" ]; do sleep 0.02; done
        """#)
    #expect(during.status == 0, "\(during.error)")
    #expect(try readFile(fixture.path("Documents/during")) == bytes("77\n"))
    // This orphan waits until the run is over, then locks. (Started without Foundation's
    // Process, whose exit-watching socket the orphan would inherit and keep open.)
    let script = #"""
      ( ( while [ ! -e "$M/Documents/go" ]; do sleep 0.02; done
          "$APPBOX" lock "$M" 2>/dev/null; echo $? > "$M/Documents/after" ) & )
      """#
    let run = try Spawn.start(
      Command.appbox,
      [
        Command.appbox, "run", fixture.mountpoint, "--", "/bin/sh", "-c",
        "APPBOX='\(Command.appbox)'; M='\(fixture.mountpoint)'; exec >/dev/null 2>&1; " + script,
      ], detach: true)
    #expect(Spawn.wait(run) == 0)
    try writeFile(fixture.path("Documents/go"), [])
    #expect(fixture.waitUntil(seconds: 30) { (try? readFile(fixture.path("Documents/after"))) == bytes("77\n") })
    #expect(fixture.deviceState == "UNLOCKED")
    try fixture.unmount()
  }

  @Test(
    "a process left by the program that double-forks after the run has ended: the new orphan is refused too; the keeper ends with the last of them"
  )
  func orphanAfterTheRunEnded() throws {
    let fixture = try MountFixture.unlocked()
    // The program's leftover waits until the run is over, then orphans a child of its own,
    // which locks. (Started without Foundation's Process: see orphansRefused.)
    let script = #"""
      echo $PPID > "$M/Documents/keeper"
      ( ( while [ ! -e "$M/Documents/go" ]; do sleep 0.02; done
          ( ( "$APPBOX" lock "$M" 2>/dev/null; echo $? > "$M/Documents/late" ) & ) ) & )
      """#
    let run = try Spawn.start(
      Command.appbox,
      [
        Command.appbox, "run", fixture.mountpoint, "--", "/bin/sh", "-c",
        "APPBOX='\(Command.appbox)'; M='\(fixture.mountpoint)'; exec >/dev/null 2>&1; " + script,
      ], detach: true)
    #expect(Spawn.wait(run) == 0)
    let keeper = try #require(
      pid_t(
        String(decoding: try readFile(fixture.path("Documents/keeper")), as: UTF8.self).trimmingCharacters(
          in: .newlines)))
    #expect(Spawn.isRunning(keeper), "the keeper stays while the program's processes do")
    try writeFile(fixture.path("Documents/go"), [])
    #expect(fixture.waitUntil(seconds: 30) { (try? readFile(fixture.path("Documents/late"))) == bytes("77\n") })
    #expect(fixture.deviceState == "UNLOCKED")
    #expect(Spawn.waitForExit(keeper, milliseconds: 30_000), "the keeper ends with the last of the program's processes")
    try fixture.unmount()
  }

  @Test("with --allow-device-control the program locks and unlocks; from outside any run, always")
  func allowedWithFlagAndOutside() throws {
    let fixture = try MountFixture.unlocked(["--grace", "0"])
    let allowed = try Self.run(
      fixture, ["--allow-device-control"],
      script: #""$APPBOX" lock "$M"; echo "lock=$?"; "$APPBOX" unlock "$M"; echo "unlock=$?""#)
    #expect(RunCommandTests.lines(allowed.output) == ["lock": "0", "unlock": "0"], "\(allowed.error)")
    #expect(try Experiment.events(fixture.mountpoint, type: "state", atLeast: 2).count == 2)

    // A run that refuses is under way; the user's own terminal (this process) still controls.
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Command.appbox)
    process.arguments = [
      "run", fixture.mountpoint, "--", "/bin/sh", "-c",
      "touch \"$HOME/Documents/running\"; while [ -e \"$HOME/Documents/running\" ]; do sleep 0.02; done",
    ]
    try process.run()
    #expect(
      fixture.waitUntil(seconds: 30) { FileManager.default.fileExists(atPath: fixture.path("Documents/running")) })
    try fixture.control("lock")
    #expect(fixture.deviceState == "LOCKED")
    try fixture.control("unlock")
    #expect(fixture.deviceState == "UNLOCKED")
    try FileManager.default.removeItem(atPath: fixture.path("Documents/running"))
    try RunCommandTests.waitForExit(process)
    try fixture.unmount()
  }

  @Test("concurrent runs on one mount: each run's rule holds for its own program; a nested run cannot allow more")
  func concurrentRuns() throws {
    let fixture = try MountFixture.unlocked(["--grace", "0"])
    // Two runs at once, one refusing, one allowing; each program waits for `go`, then locks
    // and unlocks.
    let script = #"""
      touch "$M/Documents/ready-$1"; while [ ! -e "$M/Documents/go" ]; do sleep 0.02; done
      "$APPBOX" lock "$M"; echo "lock=$?"; "$APPBOX" unlock "$M"; echo "unlock=$?"
      """#
    var runs: [String: Process] = [:]
    for (name, options) in [("refused", [String]()), ("allowed", ["--allow-device-control"])] {
      let output = fixture.root + "/output-" + name
      try writeFile(output, [])
      let process = Process()
      process.executableURL = URL(fileURLWithPath: Command.appbox)
      process.arguments =
        ["run"] + options + [
          fixture.mountpoint, "--", "/bin/sh", "-c",
          "APPBOX='\(Command.appbox)'; M='\(fixture.mountpoint)'; " + script, "sh", name,
        ]
      process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
      try process.run()
      runs[name] = process
    }
    #expect(
      fixture.waitUntil(seconds: 30) {
        ["refused", "allowed"].allSatisfy {
          FileManager.default.fileExists(atPath: fixture.path("Documents/ready-\($0)"))
        }
      })
    try writeFile(fixture.path("Documents/go"), [])
    for process in runs.values { try RunCommandTests.waitForExit(process) }
    func seen(_ name: String) throws -> [String: String] {
      RunCommandTests.lines(String(decoding: try readFile(fixture.root + "/output-" + name), as: UTF8.self))
    }
    #expect(try seen("refused") == ["lock": "77", "unlock": "77"])
    #expect(try seen("allowed") == ["lock": "0", "unlock": "0"])

    let nested = try Self.run(
      fixture, script: #""$APPBOX" run --allow-device-control "$M" -- "$APPBOX" lock "$M"; echo "nested=$?""#)
    #expect(RunCommandTests.lines(nested.output) == ["nested": "77"], "\(nested.error)")
    #expect(fixture.deviceState == "UNLOCKED")
    try fixture.unmount()
  }

  @Test("in a sandbox mounted for the run, the program is refused too")
  func temporarySandbox() throws {
    let result = try Command.run(
      Command.appbox,
      ["run", "--", "/bin/sh", "-c", "'\(Command.appbox)' lock \"$HOME\"; echo \"lock=$?\""])
    #expect(result.status == 0, "\(result.error)")
    #expect(RunCommandTests.lines(result.output) == ["lock": "77"])
  }

  @Test("an experiment's program is refused too: it cannot purge or resize the sandbox it is measured in")
  func experimentProgram() throws {
    let scratch = try SandboxDirectories(prefix: "appbox-experiment-control")
    let out = scratch.root + "/codes"
    let script =
      "A='\(Command.appbox)'; \"$A\" purge \"$HOME\" --bytes 1M; p=$?; \"$A\" resize \"$HOME\" --capacity 1G; echo \"purge=$p resize=$?\" > '\(out)'"
    let result = try Command.run(
      Command.appbox, ["experiment", "--capacities", "4M", "--", "/bin/sh", "-c", script])
    #expect(result.status == 0, "\(result.error)")
    #expect(try String(contentsOfFile: out, encoding: .utf8) == "purge=77 resize=77\n")
  }

  @Test("/proc/PID/stat: parent and start time, after a command name with spaces and parentheses")
  func processStat() throws {
    let line = "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10\n"
    #expect(ProcessStat(parsing: Array(line.utf8)) == ProcessStat(parent: 17, startTime: 987654))
    #expect(ProcessStat(parsing: Array("4242 (x) S 17".utf8)) == nil)
    let mine = try Sys.processStat(getpid())
    #expect(mine.parent == getppid())
    #expect(try Sys.processStat(mine.parent).startTime <= mine.startTime)
    #expect(throws: Errno.self) { try Sys.processStat(Int32.max) }
  }
}
