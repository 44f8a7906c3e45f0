/// What the app did with a name purged recently: the purge's cost to it.
public enum PurgeCostKind: String, Sendable, Hashable, CaseIterable {
  /// Created it again (create, mknod, or a rename onto it).
  case recreated
  /// Looked it up and found it missing (the first such lookup after the purge).
  case missed
}

/// What purges cost the app so far, for `appbox status`.
public struct PurgeCostCounters: Sendable, Hashable {
  /// Purged names created again.
  public var recreated = 0
  /// The bytes those names had when purged.
  public var recreatedBytes: Int64 = 0
  /// Purged names looked up and missed (once per purge).
  public var missed = 0

  /// Creates zero counters.
  public init() {}

  /// Counts one re-creation or missed lookup of a purged name.
  /// - Parameters:
  ///   - kind: What the app did.
  ///   - purgedBytes: The bytes the file had when purged.
  public mutating func count(_ kind: PurgeCostKind, purgedBytes: Int64) {
    switch kind {
    case .recreated:
      recreated += 1
      recreatedBytes += purgedBytes
    case .missed:
      missed += 1
    }
  }
}
