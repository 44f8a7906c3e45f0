import Foundation
import Posix
import SandboxPolicy
import Synchronization
import Testing

@testable import AppBoxCLI

#if canImport(Glibc)
  import Glibc
#endif

extension DeviceControlGate {
  /// The answer to `request` on a connection of `pid`'s, bound now (the process still the
  /// one that connected).
  fileprivate func answer(_ request: String, peer pid: pid_t) -> String? {
    answer(request, from: bind(pid, isConnector: { true }))
  }

  /// A connection of `pid`'s, bound now and admitted.
  fileprivate func admit(_ pid: pid_t) -> ControlConnectionShares.Holder? {
    admit(bind(pid, isConnector: { true }))
  }
}

/// The device-control gate over a process table of the test's own: who is refused, that
/// every error on the way refuses (fails closed) and is logged, and that nothing a run's
/// program sends fills it or takes all the connections.
@Suite("Device-control gate")
struct DeviceControlGateTests {
  /// init (1) ─ shell (2) ─ keeper (10) ─ program (50) ─ child (60); a stranger (20).
  fileprivate static func world() -> (FakeProcesses, DeviceControlGate, LogLines) {
    let processes = FakeProcesses()
    processes.add(1, parent: 0, start: 1)
    processes.add(2, parent: 1)
    processes.add(10, parent: 2)
    processes.add(50, parent: 10)
    processes.add(60, parent: 50)
    processes.add(20, parent: 1)
    let log = LogLines()
    let gate = DeviceControlGate(readStat: processes.reader, log: log.sink)
    return (processes, gate, log)
  }

  static func refused(_ reply: String?) -> Bool { reply?.contains("\"refused\":true") == true }

  @Test("a run's program and its descendants are refused; the keeper, strangers and other verbs are not")
  func refusedInRun() {
    let (_, gate, _) = Self.world()
    #expect(gate.answer("lock", peer: 60) == nil, "no run yet")
    #expect(gate.answer("run deny", peer: 10)?.contains("\"recorded\":true") == true)
    for verb in ["lock", "unlock", "purge bytes 1", "resize 9999999 resize"] {
      #expect(Self.refused(gate.answer(verb, peer: 50)), "\(verb)")
      #expect(Self.refused(gate.answer(verb, peer: 60)), "\(verb)")
      #expect(gate.answer(verb, peer: 10) == nil)
      #expect(gate.answer(verb, peer: 20) == nil)
    }
    #expect(gate.answer("status", peer: 60) == nil)
    #expect(gate.statusJSON.contains("\"refused\":8"), "\(gate.statusJSON)")
  }

  @Test("a run that allows device control records nothing")
  func allowRecordsNothing() {
    let (_, gate, _) = Self.world()
    #expect(gate.answer("run allow", peer: 10)?.contains("\"ok\":true") == true)
    #expect(gate.answer("lock", peer: 60) == nil)
    #expect(gate.statusJSON.hasPrefix("{\"runs\":0,"))
  }

  @Test("thousands of registrations from a run's program record nothing; a new run still registers and holds")
  func registrationsFromAProgramAddNothing() {
    let (processes, gate, _) = Self.world()
    _ = gate.answer("run deny", peer: 10)
    for pid in pid_t(1000)..<pid_t(6000) {
      processes.add(pid, parent: 50)
      let reply = gate.answer(pid % 2 == 0 ? "run deny" : "run allow", peer: pid)
      #expect(reply?.contains("\"ok\":true") == true)
    }
    #expect(gate.statusJSON.hasPrefix("{\"runs\":1,"), "\(gate.statusJSON)")
    // A new run from the user's shell, and its program.
    processes.add(30, parent: 2)
    processes.add(31, parent: 30)
    #expect(gate.answer("run deny", peer: 30)?.contains("\"recorded\":true") == true)
    #expect(Self.refused(gate.answer("lock", peer: 31)))
    #expect(Self.refused(gate.answer("lock", peer: 1500)))
    #expect(gate.answer("lock", peer: 2) == nil)
  }

  /// Which process's reads fail, and how.
  static let readFaults: [(pid_t, Errno)] = [
    (60, Errno.tooManyOpenFiles),  // the peer itself
    (50, Errno.tooManyOpenFiles),  // a parent, mid-walk
    (10, Errno(rawValue: ENOMEM)),  // the run's keeper
    (2, Errno.accessDenied),
    (60, Errno.noEntry),  // the peer is gone (it sent its request and exited)
  ]

  @Test("an ancestry that cannot be read is refused while a run is recorded, and logged", arguments: readFaults)
  func unreadableAncestryRefused(_ pid: pid_t, _ errno: Errno) {
    let (processes, gate, log) = Self.world()
    _ = gate.answer("run deny", peer: 10)
    processes.fail(pid, errno)
    let reply = gate.answer("lock", peer: 60)
    #expect(Self.refused(reply), "\(reply ?? "allowed")")
    #expect(gate.statusJSON.contains("\"unverifiable\":1"), "\(gate.statusJSON)")
    #expect(log.all.count == 1 && log.all[0].contains("refused lock to process 60"), "\(log.all)")
  }

  @Test("an ancestry deeper than the walk follows is refused, not cut short")
  func deepAncestryRefused() {
    let (processes, gate, _) = Self.world()
    _ = gate.answer("run deny", peer: 10)
    let deepest = processes.chain(below: 60, from: 100_000, count: DeviceControlGate.maximumDepth + 10)
    let reply = gate.answer("lock", peer: deepest)
    #expect(Self.refused(reply), "\(reply ?? "allowed")")
    #expect(reply?.contains("deeper") == true)
  }

  @Test("an ancestry that keeps changing while read is refused")
  func changingAncestryRefused() {
    let (processes, gate, _) = Self.world()
    _ = gate.answer("run deny", peer: 10)
    processes.fail(50, .noEntry)  // the parent seems to exit at every walk, and 60 never moves
    #expect(Self.refused(gate.answer("lock", peer: 60)))
  }

  @Test("a run whose keeper cannot be read while gone ones are looked for is kept, not forgotten")
  func unreadableRunKept() {
    let (processes, gate, _) = Self.world()
    _ = gate.answer("run deny", peer: 10)
    // Enough other runs that the next registration looks for gone ones; they are gone.
    for pid in pid_t(200)..<pid_t(200 + DeviceControlRuns.minimumPruneSize - 1) {
      processes.add(pid, parent: 2)
      _ = gate.answer("run deny", peer: pid)
      processes.remove(pid)
    }
    processes.fail(10, .tooManyOpenFiles, times: 1)  // the one read of it while pruning
    processes.add(300, parent: 2)
    _ = gate.answer("run deny", peer: 300)
    #expect(gate.statusJSON.hasPrefix("{\"runs\":2,"), "the gone runs forgotten, 10 and 300 kept: \(gate.statusJSON)")
    #expect(Self.refused(gate.answer("lock", peer: 60)), "the keeper's program is still refused")
  }

  @Test("a registration whose peer cannot be read is refused (the program does not run)")
  func unreadableRegistrationRefused() {
    let (processes, gate, _) = Self.world()
    processes.fail(10, .tooManyOpenFiles)
    let reply = gate.answer("run deny", peer: 10)
    #expect(reply?.hasPrefix("{\"ok\":false") == true && reply?.contains("not registered") == true)
    #expect(gate.answer("run end", peer: 10)?.hasPrefix("{\"ok\":false") == true)
    #expect(gate.answer("run", peer: 10)?.hasPrefix("{\"ok\":false") == true)
  }

  @Test("a run's program holds at most its share of the connections; others still get theirs")
  func connectionShares() {
    let (processes, gate, _) = Self.world()
    _ = gate.answer("run deny", peer: 10)
    var held: [ControlConnectionShares.Holder] = []
    for pid in pid_t(1000)..<pid_t(1020) {
      processes.add(pid, parent: 50)
      if let holder = gate.admit(pid) { held.append(holder) }
    }
    #expect(held.count == ControlConnectionShares.perRunLimit)
    #expect(gate.admit(2) == .unconfined)
    #expect(gate.admit(20) == .unconfined)
    processes.fail(1500, .tooManyOpenFiles)
    #expect(gate.admit(1500) == .unverifiable)
    gate.release(held[0])
    #expect(gate.admit(1000) == .run(10))
    #expect(gate.statusJSON.contains("\"turnedAway\":16"), "\(gate.statusJSON)")
  }

  @Test("refusals for unreadable ancestries are logged at most once a second, with a count of the rest")
  func logIsPaced() {
    let (processes, gate, log) = Self.world()
    _ = gate.answer("run deny", peer: 10)
    processes.fail(60, .tooManyOpenFiles)
    for _ in 0..<1000 { _ = gate.answer("lock", peer: 60) }
    #expect(log.all.count <= 2, "\(log.all.count) lines")
    #expect(gate.statusJSON.contains("\"unverifiable\":1000"))
  }

  @Test("the real /proc: this process's ancestry ends at init; a gone pid is unknown")
  func realProc() throws {
    let gate = DeviceControlGate()
    guard case .known(let chain) = gate.ancestry(of: getpid()) else {
      Issue.record("this process's ancestry could not be read")
      return
    }
    #expect(chain.first?.pid == getpid())
    #expect(chain.count >= 2 && chain[1].pid == getppid())
    #expect(zip(chain, chain.dropFirst()).allSatisfy { $0.startTime >= $1.startTime })
    if case .known = gate.ancestry(of: pid_t.max) { Issue.record("a pid that does not exist has a known ancestry") }
  }
}
