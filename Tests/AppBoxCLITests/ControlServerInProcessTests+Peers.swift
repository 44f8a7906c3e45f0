import Foundation
import Posix
import SandboxPolicy
import Synchronization
import Testing

@testable import AppBoxCLI

#if canImport(Glibc)
  import Glibc
#endif

/// The peers a server's hook saw bound, for a test to wait on.
private final class BoundPeers: Sendable {
  private let peers = Mutex<[DeviceControlGate.Peer]>([])

  var hook: @Sendable (DeviceControlGate.Peer) -> Void { { [self] peer in peers.withLock { $0.append(peer) } } }

  /// Waits until a connection of `pid`'s has been bound (30 s at most).
  func waitFor(_ pid: pid_t) -> Bool {
    let deadline = Clock.monotonic() + 30
    while Clock.monotonic() < deadline {
      if peers.withLock({ $0.contains { $0.pid == pid } }) { return true }
      Clock.sleep(seconds: 0.005)
    }
    return false
  }
}

/// Plays a run's keeper or a peer that leaves before its request line ends:
/// - `keeper PATH`: registers (`run deny`), says the reply, stays until its input ends.
/// - `keeper-of-connector PATH`: registers, says the reply, then plays `connector` as its
///   child, reaps it and exits.
/// - `connector PATH`: connects, sends `lock` without its newline, says `connected PID`;
///   on the next line heard it starts a holder of the connection and exits; the holder, on
///   the line after, sends the newline and says the reply.
/// The holder keeps no other descriptor (Foundation's `Process` learns of an exit when
/// every copy of a socket it gives its child is closed).
private let peerScript = #"""
  import os, socket, sys
  mode, path = sys.argv[1], sys.argv[2]
  def say(text): os.write(1, (text + "\n").encode())
  def hear(): return os.read(0, 100)
  def keep_only(kept):
      for fd in range(3, 1024):
          if fd != kept:
              try:
                  os.close(fd)
              except OSError:
                  pass
  if mode.startswith("keeper"):
      s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
      s.connect(path)
      s.sendall(b"run deny\n")
      say(s.makefile("rb").readline().decode().strip())
      s.close()
      if mode == "keeper":
          while hear():
              pass
          os._exit(0)
      child = os.fork()
      if child != 0:
          os.waitpid(child, 0)
          os._exit(0)
  s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  s.connect(path)
  s.sendall(b"lock")
  say(f"connected {os.getpid()}")
  hear()
  if os.fork() == 0:
      keep_only(s.fileno())
      hear()
      s.sendall(b"\n")
      say(s.makefile("rb").readline().decode().strip())
      os._exit(0)
  os._exit(0)
  """#

extension ControlServerInProcessTests {
  @Test(
    "the ancestry judged is the one read at accept: the peer's pid naming a stranger by the newline changes nothing")
  func ancestryBoundAtAccept() throws {
    let box = try ServedSandbox(name: "bound")
    let me = getpid()
    // init (1) ─ shell (2) ─ keeper (10) ─ program (50) ─ this process, in the run; a stranger (20).
    let processes = FakeProcesses()
    processes.add(1, parent: 0, start: 1)
    processes.add(2, parent: 1)
    processes.add(10, parent: 2)
    processes.add(50, parent: 10)
    processes.add(20, parent: 1)
    processes.add(me, parent: 50)
    let gate = DeviceControlGate(readStat: processes.reader, log: { _ in })
    #expect(gate.answer("run deny", from: gate.bind(10, isConnector: { true }))?.contains("\"recorded\":true") == true)
    let bound = BoundPeers()
    try box.server(gate: gate, bound: bound.hook).start()

    let fd = try box.connect()
    defer { Sys.close(fd) }
    let deadline = Clock.monotonic() + 30
    #expect(UnixSocket.writeAll(fd, Array("lock".utf8), deadline: deadline))
    try #require(bound.waitFor(me), "the connection was never bound")
    // The process that connected exits; its pid is a stranger's by the time the line ends.
    processes.add(me, parent: 20, start: 200)
    #expect(UnixSocket.writeAll(fd, Array("\n".utf8), deadline: deadline))
    let reply = String(decoding: UnixSocket.readLine(fd, deadline: deadline).line ?? [], as: UTF8.self)
    #expect(reply.contains("\"refused\":true"), "\(reply)")
    #expect(box.filesystem.deviceState == .unlocked)
  }

  /// A real peer, outside or inside a recorded run, that exits (and is reaped) between its
  /// `lock` and the newline, the connection held by a child of it: judged as the process
  /// that connected, through its pidfd from `SO_PEERPIDFD`, or from `pidfd_open` where
  /// the kernel has no `SO_PEERPIDFD` (ENOPROTOOPT injected).
  @Test(
    "a peer that exits before its newline is judged as the process that connected",
    .timeLimit(.minutes(5)), arguments: [false, true], [false, true])
  func peerLeavesBeforeItsNewline(inRun: Bool, oldKernel: Bool) throws {
    let box = try ServedSandbox(name: "leaves")
    let bound = BoundPeers()
    try box.server(bound: bound.hook).start()
    let faults: [Syscall: SyscallFault] = oldKernel ? [.peerPIDFD: SyscallFault(Errno(rawValue: ENOPROTOOPT))] : [:]
    let (reply, pidOpens) = try SyscallFaults.injectEverywhere(faults) { faults in
      // A recorded run: the connector's parent, or another process of this one's.
      let keeper = try ScriptProcess(peerScript, [inRun ? "keeper-of-connector" : "keeper", box.socketPath])
      defer { keeper.endInput() }
      let registered = keeper.line() ?? "none"
      try #require(registered.contains("\"recorded\":true"), "\(registered)")
      let connector = inRun ? keeper : try ScriptProcess(peerScript, ["connector", box.socketPath])
      let said = try #require(connector.line(), "the connector said nothing")
      let pid = try #require(pid_t(said.dropFirst("connected ".count)), "\(said)")
      try #require(bound.waitFor(pid), "the connection was never bound")
      connector.send("exit")
      // Reaped: by its keeper, which then exits, or by this process.
      if inRun { keeper.waitForExit() } else { connector.waitForExit() }
      try #require(kill(pid, 0) != 0, "process \(pid) is still there")
      connector.send("send")
      return (connector.line() ?? "none", faults.failures(.peerPIDFD))
    }
    #expect(oldKernel == (pidOpens > 0))
    if inRun {
      #expect(reply.contains("\"refused\":true"), "\(reply)")
      #expect(box.filesystem.deviceState == .unlocked)
    } else {
      #expect(reply.hasPrefix(#"{"ok":true,"state":"#), "\(reply)")
      #expect(box.filesystem.deviceState != .unlocked)
    }
  }

  @Test(
    "a peer reaped before its connection is taken has no live pidfd, either way it is taken",
    .timeLimit(.minutes(2)), arguments: [false, true])
  func peerGoneBeforeAccept(oldKernel: Bool) throws {
    let box = try ServedSandbox(name: "gone")
    let listener = try UnixSocket.listen(in: box.runtime.fd, "peer.sock")
    defer { Sys.close(listener) }
    let path = box.runtime.path + "/peer.sock"
    let faults: [Syscall: SyscallFault] = oldKernel ? [.peerPIDFD: SyscallFault(Errno(rawValue: ENOPROTOOPT))] : [:]
    try SyscallFaults.inject(faults) { _ in
      // Alive, then exited and reaped.
      let live = try ScriptProcess(
        "import socket, sys, os\ns = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); os.write(1, b'in\\n'); os.read(0, 1)",
        [path])
      #expect(live.line() == "in")
      let first = try UnixSocket.accept(listener)
      defer { Sys.close(first) }
      let peer = try PeerProcess.of(first)
      #expect(peer.binding == (oldKernel ? .pid : .connection))
      #expect(peer.credentials.pid == live.pid)
      #expect(peer.isStillThere)
      live.endInput()
      live.waitForExit()
      #expect(!peer.isStillThere, "a reaped peer is still there")

      // Reaped before the accept.
      let early = try ScriptProcess(
        "import socket, sys\ns = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])", [path])
      early.waitForExit()
      let second = try UnixSocket.accept(listener)
      defer { Sys.close(second) }
      let gone = try PeerProcess.of(second)
      #expect(!gone.isStillThere, "binding \(gone.binding)")
      let gate = DeviceControlGate()
      let judged = gate.bind(gone.credentials.pid) { gone.isStillThere }
      #expect(judged.process == nil)
      if case .known = judged.ancestry { Issue.record("a reaped peer's ancestry is known") }
    }
  }
}
