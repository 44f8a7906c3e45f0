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
  /// The run thread `tid` is in, nil when it is in none.
  /// - Throws: when that cannot be told (its `/proc` entry cannot be read): the request is
  ///   refused.
  func run(of tid: pid_t) throws(Errno) -> RunAccess?
}

/// What one run's program may reach: its app's container and its groups', fixed for the
/// run's life (an app's groups never change while it is installed, and an app is not
/// removed while a run of it lives). Made once per run (``SandboxFilesystem/access(for:)``),
/// so a request checks a set it already has.
public final class RunAccess: Sendable {
  /// The app the run's program runs as.
  public let app: ContainerIdentifier
  /// The containers it may use.
  public let reachable: Set<ContainerNumber>

  /// The access of a run of `app` to `reachable`.
  public init(app: ContainerIdentifier, reachable: Set<ContainerNumber>) {
    self.app = app
    self.reachable = reachable
  }
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
