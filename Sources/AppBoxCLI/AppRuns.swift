import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The runs of `appbox run --app` on a device mount, by app: the daemon refuses to remove an
/// app while a run of it is going (its program may be using the container). A run registers
/// over the control channel (`app-run BUNDLE-ID`): the daemon takes the process that
/// connected, bound to the connection at its accept (``DeviceControlGate/Peer``), never
/// from the request, and keeps its start time, so a pid that a later process reuses is not
/// taken for the run. The run is going while that process (`appbox
/// run`, which waits for its program) lives.
final class AppRuns: Sendable {
  /// One run: its process, as `/proc` names it.
  private struct Run: Hashable, Sendable {
    let pid: pid_t
    let startTime: UInt64
  }

  /// Lock order: a leaf.
  private let runs = Mutex<[ContainerIdentifier: Set<Run>]>([:])

  /// Registers `process` as a run of `app`.
  func register(_ app: ContainerIdentifier, process: ProcessIdentity) {
    runs.withLock { $0[app, default: []].insert(Run(pid: process.pid, startTime: process.startTime)) }
  }

  /// A process of a run of `app` that is still going (runs that ended are forgotten).
  /// - Throws: an error reading `/proc` other than the process being gone: then whether a
  ///   run is going cannot be told, and the caller refuses.
  func running(_ app: ContainerIdentifier) throws(Errno) -> pid_t? {
    let registered = runs.withLock { $0[app] ?? [] }
    var alive: Set<Run> = []
    for run in registered {
      do throws(Errno) {
        if try Sys.processStat(run.pid).startTime == run.startTime { alive.insert(run) }
      } catch  where error == .noEntry || error == Errno(rawValue: ESRCH) {
        continue  // gone
      }
    }
    runs.withLock { table in
      let current = table[app] ?? []
      // Keep runs registered meanwhile; drop those found gone.
      let kept = current.filter { alive.contains($0) || !registered.contains($0) }
      table[app] = kept.isEmpty ? nil : kept
    }
    return alive.first?.pid
  }
}
