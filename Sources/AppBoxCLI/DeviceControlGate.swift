import Foundation
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's barrier between a run's program and the device: requests that change the
/// device (lock, unlock, purge, resize) from a process inside a run of `appbox run` that
/// does not allow device control are refused. A run's keeper (the `appbox run` process
/// that starts the program as a child subreaper and outlives every process of its tree)
/// registers over the control channel with `run allow` or `run deny`: the connecting
/// process (its `SO_PEERCRED` pid, never a pid it names) is the run; its descendants may,
/// or may not, change the device. What is recorded, and why nothing a program does can
/// fill it: ``DeviceControlRuns``.
///
/// A process belongs to a run when the run is an ancestor, by the parent chain of
/// `/proc/PID/stat`. That chain is read once per connection, when it is accepted
/// (``bind(_:isConnector:)``), and checked afterwards to be the chain of the process that
/// connected (its pidfd, ``PeerProcess``): what the connection's request is judged by is
/// bound to the connection, and a peer that exits before its request line arrives, whose
/// pid another process may have by then, is judged as the process that connected. Every
/// error on the way fails closed: a process whose ancestry cannot be read (or shown to be
/// its own) is refused while any run is recorded, counted, and logged (at most a line a
/// second). The gate also shares out the control connections (``ControlConnectionShares``)
/// so that a run's program cannot hold them all.
final class DeviceControlGate: Sendable {
  /// Reads `/proc/PID/stat` (``Sys/processStat(_:)``; a test passes a table of its own).
  typealias StatReader = @Sendable (pid_t) throws(Errno) -> ProcessStat

  /// What the gate has done, for `appbox status`.
  struct Counters {
    /// Device changes refused to a process in a refusing run.
    var refused = 0
    /// Device changes refused because the process's ancestry could not be read.
    var unverifiable = 0
    /// Control connections turned away because their run's share was used up.
    var turnedAway = 0
  }

  private struct State {
    var runs = DeviceControlRuns()
    var shares = ControlConnectionShares()
    var counters = Counters()
    /// When the last line was logged (monotonic seconds), and the lines held back since.
    var loggedAt = -Double.infinity
    var heldBack = 0
  }

  /// Lock order: a leaf; never held across a `/proc` read.
  private let state = Mutex(State())
  private let readStat: StatReader
  private let log: @Sendable (String) -> Void

  /// The requests that change the device.
  static let guardedRequests: Set<String> = ["lock", "unlock", "purge", "resize", "app-install", "app-remove"]
  /// How often an ancestry walk that raced with an exiting process is tried again.
  static let walkAttempts = 8
  /// The deepest ancestry followed; a deeper one is unknown (refused), never cut short.
  static let maximumDepth = 1024

  /// A gate reading the processes with `readStat` and logging with `log` (the daemon's
  /// standard error, which is its log file).
  init(
    readStat: @escaping StatReader = { pid throws(Errno) in try Sys.processStat(pid) },
    log: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data("appbox: \($0)\n".utf8)) }
  ) {
    self.readStat = readStat
    self.log = log
  }

  // MARK: - Connections

  /// What the gate learned of a connection's peer when the connection was accepted, bound
  /// to it for its life.
  struct Peer: Sendable {
    /// The pid of the process that connected (`SO_PEERCRED`).
    let pid: pid_t
    /// That process (pid and start time), if it could be read and shown to be the one that
    /// connected.
    let process: ProcessIdentity?
    /// Its ancestry, read when the connection was accepted; unknown when it could not be
    /// read or shown to be the connecting process's.
    let ancestry: Ancestry
  }

  /// Reads the ancestry of `pid`, the peer of a connection just accepted, and binds it to
  /// the connection. `isConnector`, asked after the reads, says whether `pid` still names
  /// the process that connected (its pidfd's process has not been reaped,
  /// ``PeerProcess/isStillThere``): if not, what was read may be another process's, and
  /// the ancestry is unknown.
  func bind(_ pid: pid_t, isConnector: () -> Bool) -> Peer {
    forgetGoneIfDue()
    let stat = Result(catching: { () throws(Errno) in try readStat(pid) })
    let ancestry = ancestry(of: pid)
    guard isConnector() else {
      return Peer(
        pid: pid, process: nil,
        ancestry: .unknown("process \(pid) that connected cannot be shown to be the one with that pid now (it exited?)")
      )
    }
    switch stat {
    case .success(let stat):
      return Peer(pid: pid, process: ProcessIdentity(pid: pid, startTime: stat.startTime), ancestry: ancestry)
    case .failure(let error):
      return Peer(pid: pid, process: nil, ancestry: .unknown("cannot read /proc/\(pid)/stat: \(error)"))
    }
  }

  /// Takes a control connection for `peer`: nil when `peer` is in a refusing run (or
  /// cannot be placed) whose share is used up (``ControlConnectionShares``).
  /// - Returns: the holder to give back with ``release(_:)``.
  func admit(_ peer: Peer) -> ControlConnectionShares.Holder? {
    let admitted: ControlConnectionShares.Holder? = state.withLock { state in
      let holder = ControlConnectionShares.Holder(state.runs.decide(peer.ancestry))
      guard state.shares.admit(holder) else {
        state.counters.turnedAway += 1
        return nil
      }
      return holder
    }
    return admitted
  }

  /// Gives back a connection ``admit(_:)`` took.
  func release(_ holder: ControlConnectionShares.Holder) { state.withLock { $0.shares.release(holder) } }

  // MARK: - Requests

  /// The reply to `request` from `peer` when the gate answers it itself: a `run` request,
  /// or a refusal. Nil: the request goes on to the filesystem. `peer` is judged by what was
  /// bound to its connection at accept, against the runs recorded now.
  func answer(_ request: String, from peer: Peer) -> String? {
    // Split as ``ControlServer/handle(_:progress:)`` splits, so the verb judged is the verb served.
    let words = request.split(separator: " ").map(String.init)
    guard let verb = words.first else { return nil }
    if verb == "run" { return registration(Array(words.dropFirst()), peer: peer) }
    guard Self.guardedRequests.contains(verb) else { return nil }
    switch state.withLock({ $0.runs.decide(peer.ancestry) }) {
    case .allowed:
      return nil
    case .refused(let run):
      state.withLock { $0.counters.refused += 1 }
      return ControlServer.refusal(
        "device control refused: process \(peer.pid) runs under appbox run (pid \(run)) without --allow-device-control; start the run with appbox run --allow-device-control to let its program \(verb)"
      )
    case .unverifiable(let reason):
      state.withLock { $0.counters.unverifiable += 1 }
      note("refused \(verb) to process \(peer.pid): \(reason)")
      return ControlServer.refusal(
        "device control refused: process \(peer.pid) could not be placed outside the runs of appbox run (\(reason))")
    }
  }

  /// Serves `run allow|deny` for `peer`.
  private func registration(_ words: [String], peer: Peer) -> String {
    guard words.count == 1, words[0] == "allow" || words[0] == "deny" else {
      return ControlServer.error("bad run request (run allow or run deny)")
    }
    if words[0] == "allow" { return "{\"ok\":true,\"run\":\(peer.pid),\"recorded\":false}" }
    guard let process = peer.process else {
      let reason: String
      if case .unknown(let why) = peer.ancestry { reason = why } else { reason = "unknown" }
      return ControlServer.error("cannot read process \(peer.pid) (\(reason)): the run is not registered")
    }
    forgetGoneIfDue()
    let registration = state.withLock { $0.runs.register(process, ancestry: peer.ancestry, allowsControl: false) }
    if case .unknown(let reason) = peer.ancestry {
      note("run \(peer.pid) recorded although its ancestry could not be read: \(reason)")
    }
    return "{\"ok\":true,\"run\":\(peer.pid),\"recorded\":\(registration == .recorded)}"
  }

  // MARK: - Processes

  /// Forgets the recorded runs that are gone, when enough are recorded for it to be due
  /// (``DeviceControlRuns/needsPruning``). A run is gone when `/proc` says there is no
  /// such process, or its pid names a later one; a run that cannot be read otherwise is
  /// kept.
  private func forgetGoneIfDue() {
    guard let recorded = state.withLock({ $0.runs.needsPruning ? $0.runs.runs : nil }) else { return }
    var gone = Set<ProcessIdentity>()
    for run in recorded {
      do {
        if try readStat(run.pid).startTime != run.startTime { gone.insert(run) }
      } catch  where Self.isGone(error) {
        gone.insert(run)
      } catch {
        continue  // unreadable is not gone: kept (a record only ever refuses)
      }
    }
    state.withLock { $0.runs.forget(gone) }
  }

  /// Whether `error` from reading `/proc/PID/stat` means that the process does not exist.
  static func isGone(_ error: Errno) -> Bool { error == .noEntry || error == .noSuchProcess }

  /// `pid` and its ancestors, itself first, from `/proc/PID/stat`; unknown when `pid` is
  /// gone, a read fails, the chain is deeper than ``maximumDepth``, or it kept changing
  /// while read. A parent that exits during the walk (its children are re-parented)
  /// makes the walk start again; a parent whose pid was reused meanwhile is recognised by
  /// its start time (a parent starts before its child).
  func ancestry(of pid: pid_t) -> Ancestry {
    for _ in 0..<Self.walkAttempts {
      let first: ProcessStat
      do { first = try readStat(pid) } catch {
        return .unknown(Self.isGone(error) ? "process \(pid) is gone" : "cannot read /proc/\(pid)/stat: \(error)")
      }
      var chain = [ProcessIdentity(pid: pid, startTime: first.startTime)]
      var parent = first.parent
      var childStart = first.startTime
      var changed = false
      while parent > 0 {
        guard chain.count < Self.maximumDepth else {
          return .unknown("its ancestry is deeper than \(Self.maximumDepth) processes")
        }
        let stat: ProcessStat
        do { stat = try readStat(parent) } catch  where Self.isGone(error) {
          changed = true
          break
        } catch {
          return .unknown("cannot read /proc/\(parent)/stat: \(error)")
        }
        guard stat.startTime <= childStart else {
          changed = true  // a later process has the parent's pid: the parent exited
          break
        }
        chain.append(ProcessIdentity(pid: parent, startTime: stat.startTime))
        childStart = stat.startTime
        parent = stat.parent
      }
      if !changed { return .known(chain) }
    }
    return .unknown("its ancestry kept changing while it was read (\(Self.walkAttempts) attempts)")
  }

  // MARK: - Status and log

  /// The gate's part of `appbox status --json`: `{"runs":N,"refused":N,"unverifiable":N,"turnedAway":N}`.
  var statusJSON: String {
    state.withLock {
      "{\"runs\":\($0.runs.runs.count),\"refused\":\($0.counters.refused),\"unverifiable\":\($0.counters.unverifiable),\"turnedAway\":\($0.counters.turnedAway)}"
    }
  }

  /// Logs `message`, at most one line a second: lines in between are counted and the
  /// count goes with the next line logged.
  private func note(_ message: String) {
    let now = Clock.monotonic()
    let heldBack: Int? = state.withLock { state in
      guard now - state.loggedAt >= 1 else {
        state.heldBack += 1
        return nil
      }
      defer { state.heldBack = 0 }
      state.loggedAt = now
      return state.heldBack
    }
    guard let heldBack else { return }
    log("device control: " + message + (heldBack > 0 ? " (and \(heldBack) more not logged)" : ""))
  }
}
