import AppBoxEvents
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Tells which app, if any, a request's thread runs as (docs/architecture.md#app-confinement):
/// on a mount, the daemon's runs of `appbox run --app`, each a cgroup v2 group; in tests,
/// a table.
public protocol RunMembership: Sendable {
  /// Whether any run is registered: while none is, no process is confined and nothing is
  /// looked up.
  var hasRuns: Bool { get }
  /// The app thread `tid` runs as, nil when it is in no run.
  /// - Throws: when that cannot be told (its `/proc` entry cannot be read): the request is
  ///   refused.
  func app(of tid: pid_t) throws(Errno) -> ContainerIdentifier?
}

/// A device's app confinement: the runs' membership, and counts of what it refused. Each
/// app, container and reason is logged once per mount (``ConfinementEvent``): a refusal
/// storm costs the log at most one line per key.
final class AppConfinement: Sendable {
  /// Who runs as which app; nil on a mount whose daemon confines nothing (tests that
  /// leave it out, a plain mount).
  let membership: (any RunMembership)?

  private struct Books: Sendable {
    var refusals: [ConfinementEvent.Reason: Int] = [:]
    var logged: Set<String> = []
  }

  /// Lock order: a leaf.
  private let books = Mutex(Books())

  /// At most this many keys are remembered as logged; later keys are counted only.
  static let loggedKeys = 4096

  init(membership: (any RunMembership)?) { self.membership = membership }

  /// Counts a refusal; whether its key is logged for the first time (so to be logged).
  func count(_ event: ConfinementEvent) -> Bool {
    let key = "\(event.reason.rawValue) \(event.app ?? "") \(event.container ?? "")"
    return books.withLock { books in
      books.refusals[event.reason, default: 0] += 1
      guard books.logged.count < Self.loggedKeys else { return false }
      return books.logged.insert(key).inserted
    }
  }

  /// The refusals counted, by reason.
  var refusals: [ConfinementEvent.Reason: Int] { books.withLock { $0.refusals } }
}
