import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's barrier between a run's program and the device: requests that change the
/// device (lock, unlock, purge, resize) from a process inside a run of `appbox run` that
/// does not allow device control are refused. Runs register over the control channel:
///
/// - `run allow` / `run deny`: the connecting process (its `SO_PEERCRED` pid, never a pid
///   it names) is a run; its descendants may, or may not, change the device.
/// - `run end`: the run is ending; its descendants still running become members of the
///   run, refused themselves too (after the run exits they are re-parented out of its tree).
///
/// A process belongs to a run when the run is an ancestor, by the parent chain of
/// `/proc/PID/stat`; entries whose process is gone (or whose pid now names a later
/// process) are forgotten.
final class DeviceControlGate: Sendable {
  private let runs = Mutex(DeviceControlRuns())

  /// The requests that change the device.
  static let guardedRequests: Set<String> = ["lock", "unlock", "purge", "resize"]
  /// How often an ancestry walk that raced with an exiting process is tried again.
  static let walkAttempts = 8
  /// The deepest ancestry followed (a cycle only pid reuse could make).
  static let maximumDepth = 4096

  /// The reply to `request` when the gate answers it itself: a `run` request, or a
  /// refusal. Nil: the request goes on to the filesystem.
  func answer(_ request: String, peer: pid_t) -> String? {
    // Split as ``ControlServer/handle(_:)`` splits, so the verb judged is the verb served.
    let words = request.split(separator: " ").map(String.init)
    guard let verb = words.first else { return nil }
    if verb == "run" { return registration(Array(words.dropFirst()), peer: peer) }
    guard Self.guardedRequests.contains(verb), !runs.withLock({ $0.isEmpty }) else { return nil }
    forgetGone()
    guard let chain = Self.ancestry(of: peer) else {
      return ControlServer.refusal(
        "device control refused: the ancestry of process \(peer) could not be read (/proc), and runs of appbox run are active"
      )
    }
    guard case .refused(let run) = runs.withLock({ $0.decide(chain) }) else { return nil }
    return ControlServer.refusal(
      "device control refused: process \(peer) runs under appbox run (pid \(run)) without --allow-device-control; start the run with appbox run --allow-device-control to let its program \(verb)"
    )
  }

  /// Serves `run allow|deny|end` for `peer`.
  private func registration(_ words: [String], peer: pid_t) -> String {
    guard words.count == 1, let stat = try? Sys.processStat(peer) else {
      return ControlServer.error("bad run request (run allow, run deny or run end)")
    }
    let process = ProcessIdentity(pid: peer, startTime: stat.startTime)
    forgetGone()
    switch words[0] {
    case "allow", "deny":
      let entry = DeviceControlRuns.Entry(allowsControl: words[0] == "allow", coversItself: false, run: peer)
      guard runs.withLock({ $0.register(process, entry) }) else {
        return ControlServer.error("too many runs registered (\(DeviceControlRuns.maximumEntries))")
      }
      return "{\"ok\":true,\"run\":\(peer)}"
    case "end":
      guard let entry = runs.withLock({ $0.entries[process] }), !entry.coversItself else {
        return ControlServer.error("process \(peer) is not a registered run")
      }
      let pids: [pid_t]
      do { pids = try Sys.processIDs() } catch {
        return ControlServer.error("cannot list processes (/proc: \(error)): the run's leftover processes are not held")
      }
      let chains = pids.compactMap { Self.ancestry(of: $0) }
      let members = DeviceControlRuns.descendants(of: process, among: chains)
      let kept = runs.withLock { runs in
        let member = DeviceControlRuns.Entry(allowsControl: entry.allowsControl, coversItself: true, run: peer)
        let kept = members.filter { runs.register($0, member) }.count
        runs.remove(process)
        return kept
      }
      return "{\"ok\":true,\"members\":\(kept)}"
    default:
      return ControlServer.error("bad run request (run allow, run deny or run end)")
    }
  }

  /// Forgets the registered processes that are gone, or whose pid names a later process.
  private func forgetGone() {
    let registered = runs.withLock { Array($0.entries.keys) }
    let gone = Set(registered.filter { (try? Sys.processStat($0.pid))?.startTime != $0.startTime })
    if !gone.isEmpty { runs.withLock { $0.removeAll { gone.contains($0) } } }
  }

  /// `pid` and its ancestors, itself first, from `/proc/PID/stat`; nil when `pid` is gone
  /// or its ancestry kept changing while read. A parent that exits during the walk (its
  /// children are re-parented) makes the walk start again; a parent whose pid was reused
  /// meanwhile is recognised by its start time (a parent starts before its child).
  static func ancestry(of pid: pid_t) -> [ProcessIdentity]? {
    for _ in 0..<walkAttempts {
      guard let first = try? Sys.processStat(pid) else { return nil }
      var chain = [ProcessIdentity(pid: pid, startTime: first.startTime)]
      var parent = first.parent
      var childStart = first.startTime
      var consistent = true
      while parent > 0, chain.count < maximumDepth {
        guard let stat = try? Sys.processStat(parent), stat.startTime <= childStart else {
          consistent = false
          break
        }
        chain.append(ProcessIdentity(pid: parent, startTime: stat.startTime))
        childStart = stat.startTime
        parent = stat.parent
      }
      if consistent { return chain }
    }
    return nil
  }
}
