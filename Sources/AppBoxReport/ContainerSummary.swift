import AppBoxEvents
import SandboxPolicy

/// What a device's event log says of one container (an app's or an App Group's): its
/// usage, what was purged from it and for whose writes, what it cost, its refusals.
public struct ContainerSummary: Sendable, Hashable {
  /// The bundle or group id.
  public var id: String
  /// `app` or `group` (nil when no usage line named it).
  public var kind: String?
  /// Files and bytes purged from it, for any reason.
  public var filesPurged = 0
  public var bytesPurged: Int64 = 0
  /// Bytes purged from it under pressure for its own allocations.
  public var bytesForOwnWrites: Int64 = 0
  /// Bytes purged from it under pressure for other containers' allocations.
  public var bytesForOthers: Int64 = 0
  /// Bytes purged from other containers for its allocations.
  public var bytesOthersPaid: Int64 = 0
  /// Its purge cost (``ReportSummary/purgeCost``, for the names in it).
  public var purgeCost = 0
  /// Data Protection refusals of its items.
  public var refusals = 0
  /// The largest and the last usage its `containerUsage` lines said.
  public var peakUsed: Int64?
  public var lastUsed: Int64?

  /// An empty summary of `id`.
  public init(id: String) { self.id = id }
}

/// Bytes purged from one container's caches for another container's allocations: who
/// paid for whose writes.
public struct PaidFor: Sendable, Hashable {
  /// The container whose files were purged.
  public var cache: String
  /// The container whose allocation needed the room.
  public var writer: String
  /// How many files, and their bytes.
  public var files = 0
  public var bytes: Int64 = 0

  /// An empty entry.
  public init(cache: String, writer: String) {
    self.cache = cache
    self.writer = writer
  }
}

/// Gathers ``ContainerSummary``s and ``PaidFor`` entries from a device's events.
struct ContainerTally {
  private(set) var containers: [String: ContainerSummary] = [:]
  private(set) var paid: [String: PaidFor] = [:]
  /// Purge costs by container: each one's re-creations and missed names not created again.
  private var recreated: [String: Int] = [:]
  private var missedPaths: [String: [[UInt8]: Int]] = [:]

  private mutating func with(_ id: String, _ change: (inout ContainerSummary) -> Void) {
    change(&containers[id, default: ContainerSummary(id: id)])
  }

  mutating func purge(_ purge: PurgeEvent) {
    guard let owner = purge.container else { return }
    with(owner) {
      $0.filesPurged += 1
      $0.bytesPurged = Statistics.sum($0.bytesPurged, purge.bytes)
    }
    guard purge.reason == .pressure, let writer = purge.requester else { return }
    if writer == owner {
      with(owner) { $0.bytesForOwnWrites = Statistics.sum($0.bytesForOwnWrites, purge.bytes) }
    } else {
      with(owner) { $0.bytesForOthers = Statistics.sum($0.bytesForOthers, purge.bytes) }
      with(writer) { $0.bytesOthersPaid = Statistics.sum($0.bytesOthersPaid, purge.bytes) }
    }
    let key = owner + "\n" + writer
    var entry = paid[key] ?? PaidFor(cache: owner, writer: writer)
    entry.files += 1
    entry.bytes = Statistics.sum(entry.bytes, purge.bytes)
    paid[key] = entry
  }

  mutating func refusal(_ refusal: ProtectionEvent) {
    guard let owner = refusal.container else { return }
    with(owner) { $0.refusals = Statistics.sum($0.refusals, refusal.count) }
  }

  mutating func usage(_ usage: ContainerUsageEvent) {
    with(usage.container) {
      $0.kind = usage.kind.description
      $0.peakUsed = max($0.peakUsed ?? usage.used, usage.used)
      $0.lastUsed = usage.used
    }
  }

  /// A purged name paid for: counted against the container its path is in (a device's
  /// paths start with `Containers/`; a plain mount's are no container's).
  mutating func cost(_ cost: PurgeCostEvent) {
    let components = cost.path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
    guard let (_, name) = DeviceLayout.classify(components: components).container else { return }
    let owner = String(decoding: name, as: UTF8.self)
    switch cost.kind {
    case .recreated:
      recreated[owner, default: 0] += 1
      if let count = missedPaths[owner]?[cost.path] { missedPaths[owner]![cost.path] = count > 1 ? count - 1 : nil }
    case .missed:
      missedPaths[owner, default: [:]][cost.path, default: 0] += 1
    }
  }

  /// The summaries, by id, with their purge costs; the entries of who paid for whom.
  func finish() -> (containers: [ContainerSummary], paidFor: [PaidFor]) {
    var all = containers
    for (owner, count) in recreated { all[owner, default: ContainerSummary(id: owner)].purgeCost += count }
    for (owner, paths) in missedPaths {
      all[owner, default: ContainerSummary(id: owner)].purgeCost += paths.values.reduce(0, +)
    }
    return (
      all.values.sorted { $0.id < $1.id },
      paid.values.sorted { ($0.cache, $0.writer) < ($1.cache, $1.writer) }
    )
  }
}
