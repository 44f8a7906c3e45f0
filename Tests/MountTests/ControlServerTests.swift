import Foundation
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's control socket survives whatever a client sends, and serves one client
/// while another sits idle.
@Suite("Control server: bad requests and idle clients", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct ControlServerTests {
  /// Sends each request on a connection of its own, as raw bytes, and returns the replies.
  static func rawReplies(_ socket: String, _ requests: [String]) throws -> [String] {
    let script = """
      import json, socket, sys
      replies = []
      for request in json.loads(sys.stdin.read()):
          s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
          s.settimeout(20)
          s.connect(sys.argv[1])
          try:
              s.sendall(request.encode('latin-1'))
              s.shutdown(socket.SHUT_WR)
          except (BrokenPipeError, ConnectionResetError):
              pass
          data = b''
          try:
              while not data.endswith(b'\\n'):
                  chunk = s.recv(65536)
                  if not chunk: break
                  data += chunk
          except ConnectionResetError:
              pass
          replies.append(data.decode('utf-8', 'replace').strip())
          s.close()
      print(json.dumps(replies))
      """
    let input = try JSONSerialization.data(withJSONObject: requests)
    let result = try Command.run("/usr/bin/python3", ["-c", script, socket], input: input)
    guard result.status == 0,
      let replies = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String]
    else { throw FixtureError("the raw client failed: \(result.error)") }
    return replies
  }

  @Test("malformed, huge and out-of-range requests get an error reply; the daemon lives and nothing changes")
  func badRequests() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("tmp/t"), bytes("tmp"))
    try writeFile(fixture.path("Library/Caches/c"), bytes("cache"))
    let socket = ControlFiles.path(for: fixture.mountpoint, "sock")
    let requests = [
      "purge older-than 17280000000000000000\n", "purge older-than 1e308\n", "purge older-than inf\n",
      "purge older-than nan\n", "purge older-than -5\n", "purge older-than 1 documents\n", "purge bytes -1\n",
      "purge bytes 99999999999999999999\n", "purge domain documents\n", "purge\n", "purge bytes\n", "lock now\n",
      "{\"request\":\"lock\"}\n", "\u{0}\u{ff}\u{fe}\n", "\n", "", String(repeating: "x", count: 2_000_000) + "\n",
      "resize 0 resize\n", "resize -1 resize\n", "resize 1048575 resize\n", "resize 99999999999999999999 resize\n",
      "resize 8388608 bogus\n", "resize 8388608\n", "resize\n", "resize 1e9 schedule\n",
    ]
    let capacity = try fixture.status()["capacity"] as? NSNumber
    let replies = try Self.rawReplies(socket, requests)
    #expect(replies.count == requests.count)
    for (request, reply) in zip(requests, replies) {
      let object = (try? JSONSerialization.jsonObject(with: Data(reply.utf8))) as? [String: Any]
      #expect(object?["ok"] as? Bool == false, "\(request.prefix(60)) → \(reply.prefix(200))")
      #expect(object?["error"] is String, "\(request.prefix(60)) → \(reply.prefix(200))")
    }
    #expect(fixture.daemonPID.map { kill($0, 0) == 0 } == true, "the daemon died")
    let status = try fixture.status()
    #expect(status["state"] as? String == "UNLOCKED")
    #expect(status["capacity"] as? NSNumber == capacity)
    #expect(try readFile(fixture.path("tmp/t")) == bytes("tmp"))
    #expect(try readFile(fixture.path("Library/Caches/c")) == bytes("cache"))
    try fixture.unmount()
  }

  @Test("purge --older-than and mount --tmp-max-age refuse durations past 100 years (65); the daemon lives")
  func hugeDurations() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("tmp/t"), bytes("tmp"))
    for age in ["200000000000000d", "36501d"] {
      let purge = try Command.run(Command.appbox, ["purge", fixture.mountpoint, "--older-than", age])
      #expect(purge.status == 65, "--older-than \(age): \(purge.status) \(purge.error)")
      #expect(purge.error.contains("36500d"), "\(purge.error)")
    }
    #expect(try Command.run(Command.appbox, ["purge", fixture.mountpoint, "--older-than", "36500d"]).status == 0)
    #expect(try readFile(fixture.path("tmp/t")) == bytes("tmp"))
    #expect(fixture.daemonPID.map { kill($0, 0) == 0 } == true, "the daemon died")
    _ = try fixture.status()
    try fixture.unmount()

    let directories = try SandboxDirectories()
    for flag in ["--tmp-max-age", "--grace", "--cx-timeout"] {
      let mount = try Command.run(
        Command.appbox, ["mount", "--backing", directories.backing, flag, "200000000000000d", directories.mountpoint])
      #expect(mount.status == 65, "\(flag): \(mount.status) \(mount.error)")
      #expect(!MountFixture.isMounted(directories.mountpoint))
    }
  }

  @Test("an idle client holds up no one: status answers while it waits, and the daemon drops it after its timeout")
  func idleClient() throws {
    let fixture = try MountFixture.unlocked()
    let idle = try UnixSocket.connect(to: ControlFiles.path(for: fixture.mountpoint, "sock"))
    defer { close(idle) }
    let start = Date()
    let status = try Command.run(
      "/usr/bin/timeout", ["-s", "KILL", "20", Command.appbox, "status", fixture.mountpoint])
    #expect(status.status == 0, "status with an idle client connected: \(status.status) \(status.error)")
    #expect(Date().timeIntervalSince(start) < 5, "status waited for the idle client")
    // The daemon closes the idle connection after its read timeout (5 s), with an error.
    var timeout = timeval(tv_sec: 20, tv_usec: 0)
    setsockopt(idle, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = read(idle, &buffer, buffer.count)
    #expect(count >= 0, "the idle connection was not closed by the daemon")
    #expect(Date().timeIntervalSince(start) < 15)
    try fixture.unmount()
  }

  @Test("status --json with a reply that lacks the status exits 1 with a message, not a crash")
  func statusWithoutStatusField() throws {
    let fixture = try MountFixture.unlocked()
    let socket = ControlFiles.path(for: fixture.mountpoint, "sock")
    let pidFile = ControlFiles.path(for: fixture.mountpoint, "pid")
    let daemon = try #require(fixture.daemonPID)
    try check(rename(socket, socket + ".real"), "rename")
    let fake = try FakeControlServer(uid: 0, socket: socket, reply: #"{"ok":true}"#)
    // The fake stands in for the daemon entirely: socket and pid file.
    try Data("\(fake.process.processIdentifier)\n".utf8).write(to: URL(fileURLWithPath: pidFile))
    let json = try Command.run(Command.appbox, ["status", "--json", fixture.mountpoint])
    let human = try Command.run(Command.appbox, ["status", fixture.mountpoint])
    fake.stop()
    unlink(socket)
    try check(rename(socket + ".real", socket), "rename back")
    try Data("\(daemon)\n".utf8).write(to: URL(fileURLWithPath: pidFile))
    #expect(json.status == 1, "status --json exited \(json.status): \(json.error)")
    #expect(json.error.contains("no status"), "\(json.error)")
    #expect(human.status == 1, "status exited \(human.status): \(human.error)")
    _ = try fixture.status()
    try fixture.unmount()
  }

  @Test("a client gone before its reply cannot end the daemon: SIGPIPE is ignored from the start")
  func clientsThatLeaveEarly() throws {
    let fixture = try MountFixture.unlocked()
    // Ignored before the daemon serves anyone, not only once libfuse's loop has begun (its
    // handler comes late: a reply written in between to a client that had left ended it).
    let pid = try #require(fixture.daemonPID)
    let status = String(decoding: try readFile("/proc/\(pid)/status"), as: UTF8.self)
    let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("SigIgn:") })
    let ignored = try #require(UInt64(line.dropFirst("SigIgn:".count).trimmingCharacters(in: .whitespaces), radix: 16))
    #expect(ignored & (1 << UInt64(SIGPIPE - 1)) != 0, "\(line)")
    let socket = ControlFiles.path(for: fixture.mountpoint, "sock")
    for _ in 0..<50 {
      let fd = try UnixSocket.connect(to: socket)
      UnixSocket.writeAll(fd, Array("status\n".utf8))
      close(fd)
    }
    // The daemon is alive and serves again: those 50 may still hold its 16 connection
    // threads for a moment (each answered "busy" meanwhile), so ask until one is served.
    var lastError = "none"
    let served = MountFixtureWait.until(seconds: 30) {
      do { _ = try fixture.status() } catch {
        lastError = "\(error)"
        return false
      }
      return true
    }
    #expect(served, "no status served after the clients left; last error: \(lastError)")
    #expect(kill(pid, 0) == 0, "the daemon \(pid) is gone")
    try fixture.unmount()
  }

  @Test("past 16 connections at once the daemon answers busy at once, and serves again when they close")
  func connectionBound() throws {
    let fixture = try MountFixture.unlocked()
    let socket = ControlFiles.path(for: fixture.mountpoint, "sock")
    var idle: [Int32] = []
    defer { idle.forEach { close($0) } }
    for _ in 0..<16 { idle.append(try UnixSocket.connect(to: socket)) }
    let extra = try UnixSocket.connect(to: socket)
    defer { close(extra) }
    let reply = String(
      decoding: UnixSocket.readLine(extra, deadline: Clock.monotonic() + 3).line ?? [], as: UTF8.self)
    #expect(reply.contains("busy"), "the 17th connection got: \(reply)")
    idle.forEach { close($0) }
    idle = []
    var lastError = "none"
    let served = MountFixtureWait.until(seconds: 30) {
      do { _ = try fixture.status() } catch {
        lastError = "\(error)"
        return false
      }
      return true
    }
    // What to look at when it is not: whether the daemon lives, and what it logged.
    let alive = fixture.daemonPID.map { kill($0, 0) == 0 } ?? false
    let log = (try? readFile(ControlFiles.path(for: fixture.mountpoint, "log"))).map {
      String(decoding: $0.suffix(2000), as: UTF8.self)
    }
    #expect(
      served,
      "status after the idle clients left; the last attempt: \(lastError); daemon alive: \(alive); its log: \(log ?? "none")"
    )
    try fixture.unmount()
  }

  @Test("16 clients trickling a byte a second hold no connection past its deadline: status gets through in its retry")
  func tricklingClients() throws {
    let fixture = try MountFixture.unlocked()
    let socket = ControlFiles.path(for: fixture.mountpoint, "sock")
    var held: [Int32] = []
    defer { held.forEach { close($0) } }
    for _ in 0..<16 {
      let fd = try UnixSocket.connect(to: socket)
      held.append(fd)
      UnixSocket.writeAll(fd, Array("l".utf8), deadline: Clock.monotonic() + 5)
    }
    // Every connection is held: one more is turned away.
    let probe = try UnixSocket.connect(to: socket)
    let busy = String(decoding: UnixSocket.readLine(probe, deadline: Clock.monotonic() + 5).line ?? [], as: UTF8.self)
    close(probe)
    #expect(busy.contains("busy"), "\(busy)")
    // A byte a second on each, never a newline, until the daemon closes them.
    let trickle = Thread { [held] in
      var open = Set(held)
      let end = Date().addingTimeInterval(30)
      while !open.isEmpty && Date() < end {
        Thread.sleep(forTimeInterval: 1)  // the attack's pace, not a wait for the daemon
        for fd in open where !UnixSocket.writeAll(fd, Array("o".utf8), deadline: Clock.monotonic() + 1) {
          open.remove(fd)
        }
      }
    }
    trickle.start()
    let start = Date()
    let status = try Command.run(
      "/usr/bin/timeout", ["-s", "KILL", "30", Command.appbox, "status", fixture.mountpoint])
    #expect(status.status == 0, "status with 16 trickling clients: \(status.status) \(status.error)")
    #expect(Date().timeIntervalSince(start) < 20)
    // Each was closed with an error, having run nothing.
    for fd in held {
      let reply = UnixSocket.readLine(fd, deadline: Clock.monotonic() + 10)
      #expect(String(decoding: reply.line ?? [], as: UTF8.self).contains("no whole request line"), "\(reply)")
    }
    try fixture.unmount()
  }

  @Test("a request without its newline is refused, never run: not at the deadline, not at the end of the stream")
  func requestWithoutNewline() throws {
    let fixture = try MountFixture.unlocked(["--grace", "0"])
    let socket = ControlFiles.path(for: fixture.mountpoint, "sock")
    let waiting = try UnixSocket.connect(to: socket)
    defer { close(waiting) }
    UnixSocket.writeAll(waiting, Array("lock".utf8), deadline: Clock.monotonic() + 5)
    let ended = try UnixSocket.connect(to: socket)
    defer { close(ended) }
    UnixSocket.writeAll(ended, Array("lock".utf8), deadline: Clock.monotonic() + 5)
    shutdown(ended, Int32(SHUT_WR))
    let atEnd = UnixSocket.readLine(ended, deadline: Clock.monotonic() + 20).line ?? []
    #expect(String(decoding: atEnd, as: UTF8.self).contains("without its newline"), "\(atEnd)")
    let atDeadline = UnixSocket.readLine(waiting, deadline: Clock.monotonic() + 20).line ?? []
    #expect(String(decoding: atDeadline, as: UTF8.self).contains("no whole request line"), "\(atDeadline)")
    #expect(fixture.deviceState == "UNLOCKED")
    try fixture.unmount()
  }
}
