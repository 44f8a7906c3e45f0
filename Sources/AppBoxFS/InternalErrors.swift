import Posix
import SandboxPolicy
import Synchronization

/// Where the daemon met an error that no program's request returns, and decided
/// anyway, failing closed (docs/reference.md, Security): each is written to the daemon's
/// log and counted here, for `appbox status` (`internalErrors`).
enum InternalErrorSite: String, CaseIterable, Sendable {
  /// An item's class attribute could not be read: the item counts as `complete`.
  case classRead
  /// A file could not be measured after a change: what was reserved for the change stays
  /// charged (the worst case) until the next measurement. A device's directory that
  /// gained or lost a container is charged a block (the most one entry takes).
  case measure
  /// A written file's pages could not be written back at its release: what the backing
  /// filesystem allocates (or frees) when it writes them is charged at the file's next
  /// measurement (until then the books may be off by that much).
  case writeback
  /// A purge could not open a victim's directory: those victims stay, purgeable again.
  case purgeDirectory
  /// A purge could not identify a victim's directory: the kernel is not told, and keeps
  /// the purged name until its entry times out (the daemon answers it ESTALE meanwhile).
  case purgeNotice
  /// A file could not be armed for revocable passthrough: its reads go through the daemon.
  case passthroughArm
  /// A lock could not refuse the passthrough reads of a file whose class closed: reads
  /// through handles opened before may go on until a later change of state succeeds
  /// (each tries again).
  case passthroughRefuse
  /// An unlock could not let a file's passthrough reads skip the daemon again: they keep
  /// asking it, and it allows them.
  case passthroughAllow
  /// A forgotten file's mark could not be removed: its reads keep asking the daemon, which
  /// allows them.
  case passthroughDisarm
  /// A directory moved to another domain could not be measured or walked: its usage stays
  /// counted in the old domain until the next mount (the total is right).
  case domainMove
}

/// Counts of ``InternalErrorSite`` errors, by site.
final class InternalErrors: Sendable {
  private let counts = Mutex<[InternalErrorSite: Int]>([:])

  /// Counts one error at `site`.
  func count(_ site: InternalErrorSite) {
    counts.withLock { $0[site, default: 0] += 1 }
  }

  /// Errors counted at `site`.
  func count(at site: InternalErrorSite) -> Int { counts.withLock { $0[site, default: 0] } }

  /// `{"total":1,"bySite":{"classRead":1,…}}`, every site listed.
  var jsonObject: String {
    let counts = counts.withLock { $0 }
    let sites = InternalErrorSite.allCases.map { JSONText.quoted($0.rawValue) + ":" + String(counts[$0, default: 0]) }
    let total = counts.values.reduce(0, +)
    return "{\"total\":" + String(total) + ",\"bySite\":{" + sites.joined(separator: ",") + "}}"
  }
}

extension SandboxFilesystem {
  /// Logs (the daemon's log) and counts an error met at `site` that no request returns;
  /// `what` says what was being done and what was decided.
  func internalError(_ site: InternalErrorSite, _ error: Errno, _ what: @autoclosure () -> String) {
    internalErrors.count(site)
    log("\(what()): \(error.name) (\(error)) [\(site.rawValue)]")
  }
}
