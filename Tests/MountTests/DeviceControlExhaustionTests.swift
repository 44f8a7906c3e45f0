import Foundation
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The device-control barrier under exhaustion: a program under `appbox run` that
/// registers thousands of its processes as runs (more than the 4096 the daemon once had
/// room for), or holds every control connection it can, neither turns away a new run or
/// the user's own commands nor frees a process the run left behind.
@Suite("device-control barrier under exhaustion", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct DeviceControlExhaustionTests {
  /// The attacker, a Python program run under `appbox run`, given a pipe as descriptor 3
  /// whose other end the test holds (closing it ends everything the attacker started).
  /// It writes `keeper=PID` (its parent: the run's keeper) and what it achieved to the file
  /// RESULTS. `register SOCKET RESULTS N R GO OUT APPBOX MOUNTPOINT`: N child processes
  /// stay after it (as `cat` of that pipe), the first R of them registered over the
  /// control socket (`run deny`, `run allow` in turn); the last child waits for the file
  /// GO, then runs `appbox lock` and writes its status to OUT (whole: by a rename). `hold SOCKET RESULTS`:
  /// keeps as many idle control connections open as the daemon lets it (opening more as
  /// it closes them).
  static let attacker = #"""
    import os, select, socket, subprocess, sys, time
    mode, path, results = sys.argv[1], sys.argv[2], open(sys.argv[3], "w")
    results.write(f"keeper={os.getppid()}\n")
    results.flush()

    def input_ended(seconds):
        ready, _, _ = select.select([3], [], [], seconds)
        return bool(ready) and os.read(3, 1) == b""

    if mode == "register":
        count, registering = int(sys.argv[4]), int(sys.argv[5])
        go, out, appbox, mountpoint = sys.argv[6], sys.argv[7], sys.argv[8], sys.argv[9]
        null = os.open("/dev/null", os.O_WRONLY)
        recorded = accepted = 0
        for i in range(count):
            r, w = os.pipe()
            if os.fork() == 0:
                os.close(r)
                answer = b"-"
                if i < registering:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(path)
                    s.sendall(b"run deny\n" if i % 2 == 0 else b"run allow\n")
                    reply = s.makefile("rb").readline()
                    s.close()
                    answer = b"r" if b'"recorded":true' in reply else b"a" if reply.startswith(b'{"ok":true') else b"x"
                os.write(w, answer)
                os.dup2(3, 0)
                os.dup2(null, 1)
                os.dup2(null, 2)
                os.execv("/bin/cat", ["cat"])
            os.close(w)
            answer = os.read(r, 1)
            os.close(r)
            accepted += answer in (b"r", b"a")
            recorded += answer == b"r"
        # The last one started: it waits for the file GO, then locks.
        if os.fork() == 0:
            while not os.path.exists(go):
                if input_ended(0.05):
                    os._exit(1)
            status = subprocess.call([appbox, "lock", mountpoint], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Whole or not at all: the test reads OUT as soon as it exists.
            with open(out + ".part", "w") as f:
                f.write(f"{status}\n")
            os.rename(out + ".part", out)
            os._exit(0)
        results.write(f"accepted={accepted}\nrecorded={recorded}\n")
    else:
        held = []
        while not input_ended(0.05):
            for s in list(held):
                try:
                    if s.recv(1, socket.MSG_DONTWAIT) == b"":
                        raise ConnectionError
                    held.remove(s)  # answered (busy), and closed by the daemon
                    s.close()
                except BlockingIOError:
                    pass
                except OSError:
                    held.remove(s)
                    s.close()
            while len(held) < 32:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(path)
                except OSError:
                    s.close()
                    break
                held.append(s)
        results.write("stopped=yes\n")
    """#

  @Test(
    "a run's program registers hundreds of processes and leaves thousands: a new run still works, its straggler is still refused"
  )
  func registrationsCannotFill() throws {
    let fixture = try MountFixture.unlocked(["--grace", "0"])
    let go = fixture.root + "/go"
    let out = fixture.root + "/straggler"
    // More processes left than the 4096 entries the daemon once held (filled at the run's
    // end, the straggler started last left out); registering each of them took time
    // quadratic in their number, so only some register.
    let count = 4200
    let registering = 600
    let attack = try AttackerRun(
      fixture, "register", [String(count), String(registering), go, out, Command.appbox, fixture.mountpoint])
    defer { attack.end() }
    attack.waitForExit(seconds: 300)
    let seen = attack.results
    #expect(attack.status == 0)
    #expect(seen["accepted"] == String(registering), "\(seen)")
    #expect(seen["recorded"] == "0", "a refused program's registrations are not recorded")

    // New runs register and hold their own programs: one that stays while another starts.
    let staying = fixture.root + "/staying"
    let first = Process()
    first.executableURL = URL(fileURLWithPath: Command.appbox)
    first.arguments = [
      "run", fixture.mountpoint, "--", "/bin/sh", "-c",
      "touch '\(staying)'; while [ -e '\(staying)' ]; do sleep 0.02; done",
    ]
    try first.run()
    #expect(fixture.waitUntil(seconds: 60) { FileManager.default.fileExists(atPath: staying) || !first.isRunning })
    let next = try DeviceControlBarrierTests.run(fixture, script: #""$APPBOX" lock "$M"; echo "lock=$?""#)
    #expect(next.status == 0, "the new run: \(next.error)")
    #expect(RunCommandTests.lines(next.output) == ["lock": "77"], "\(next.output) \(next.error)")
    try? FileManager.default.removeItem(atPath: staying)
    try RunCommandTests.waitForExit(first)
    #expect(first.terminationStatus == 0, "the run that stayed")

    // The attacker's run has ended; the process it left waiting locks now, and is refused.
    try writeFile(go, [])
    #expect(fixture.waitUntil(seconds: 60) { (try? readFile(out)) != nil }, "the straggler never locked")
    #expect(try readFile(out) == bytes("77\n"))
    #expect(fixture.deviceState == "UNLOCKED")

    // The user's own terminal keeps control.
    try fixture.control("lock")
    #expect(fixture.deviceState == "LOCKED")
    try fixture.control("unlock")
    let status = try Quota.status(fixture.mountpoint)
    let gate = try #require(status["deviceControl"] as? [String: Any], "\(status)")
    // The three runs' keepers at most (gone ones are forgotten in batches), nothing of the
    // attacker's registrations.
    #expect((gate["runs"] as? Int ?? 99) <= 3, "\(gate)")
    #expect((gate["refused"] as? Int ?? 0) >= 2, "\(gate)")

    attack.end()
    #expect(Spawn.waitForExit(attack.keeper, milliseconds: 60_000), "the keeper ends with the last of its processes")
    try fixture.unmount()
  }

  @Test("a run's program holding every control connection it can: a new run and the user's commands still work")
  func connectionsCannotBeHeld() throws {
    let fixture = try MountFixture.unlocked(["--grace", "0"])
    let attack = try AttackerRun(fixture, "hold", [])
    defer { attack.end() }
    // Until the daemon has turned one of its connections away, the attacker has not got all
    // it can have.
    #expect(
      fixture.waitUntil(seconds: 30) {
        guard let result = try? Command.run(Command.appbox, ["status", "--json", fixture.mountpoint]),
          let status = try? JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        else { return false }
        return ((status["deviceControl"] as? [String: Any])?["turnedAway"] as? Int ?? 0) > 0
      }, "the attacker never filled its share")

    let next = try DeviceControlBarrierTests.run(fixture, script: #""$APPBOX" lock "$M"; echo "lock=$?""#)
    #expect(next.status == 0, "the new run: \(next.error)")
    #expect(RunCommandTests.lines(next.output) == ["lock": "77"], "\(next.output) \(next.error)")
    let lock = try Command.run(Command.appbox, ["lock", fixture.mountpoint])
    #expect(lock.status == 0, "\(lock.error)")
    #expect(fixture.deviceState == "LOCKED")
    let unlock = try Command.run(Command.appbox, ["unlock", fixture.mountpoint])
    #expect(unlock.status == 0, "\(unlock.error)")

    attack.end()
    attack.waitForExit(seconds: 60)
    #expect(attack.status == 0)
    #expect(attack.results["stopped"] == "yes", "\(attack.results)")
    try fixture.unmount()
  }
}

/// The attacker under `appbox run` on a fixture's mount, in a session of its own with a
/// pipe as descriptor 3 whose write end the test holds (closing it ends everything the
/// attacker left), and no other descriptor of the test's (Foundation's `Process` would
/// hand it the socket on which it learns that `appbox run` exited, which the leftovers
/// would then keep open).
final class AttackerRun {
  let pid: pid_t
  private let input: ReadinessPipe
  private let resultsPath: String
  private var ended = false
  private(set) var status: Int32?

  init(_ fixture: MountFixture, _ mode: String, _ arguments: [String]) throws {
    resultsPath = fixture.root + "/attacker-results"
    input = try ReadinessPipe()
    try Sys.setCloseOnExec(input.writeFD)
    pid = try Spawn.start(
      Command.appbox,
      [
        Command.appbox, "run", fixture.mountpoint, "--", "/usr/bin/python3", "-c",
        DeviceControlExhaustionTests.attacker,
        mode, ControlFiles.path(for: fixture.mountpoint, "sock"), resultsPath,
      ] + arguments, detach: true, passing: input.readFD)
    Sys.close(input.readFD)
  }

  /// Waits for `appbox run` to end (failing the test after `seconds`).
  func waitForExit(seconds: Double, sourceLocation: SourceLocation = #_sourceLocation) {
    guard status == nil else { return }
    guard Spawn.waitForExit(pid, milliseconds: Int32(seconds * 1000)) else {
      Issue.record("the attacker's run did not end within \(seconds) s", sourceLocation: sourceLocation)
      return
    }
    status = Spawn.wait(pid)
  }

  /// What the attacker wrote.
  var results: [String: String] {
    RunCommandTests.lines((try? String(decoding: readFile(resultsPath), as: UTF8.self)) ?? "")
  }
  /// The run's keeper, as the program saw it (its parent).
  var keeper: pid_t { pid_t(results["keeper"] ?? "") ?? 0 }

  /// Ends what the attacker left behind: their pipe reaches its end.
  func end() {
    guard !ended else { return }
    ended = true
    Sys.close(input.writeFD)
  }

  deinit {
    end()
    if status == nil, Spawn.waitForExit(pid, milliseconds: 60_000) { status = Spawn.wait(pid) }
  }
}
