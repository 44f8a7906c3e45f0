/// The bounds of the event logs (docs/reference.md, "Events"): no client can grow them
/// without limit.
public struct EventLogLimits: Sendable, Hashable {
  /// A segment's size: a mount's log is rotated when the next lines would take its
  /// current segment past this. Rotation keeps the previous segment, so a mount's log
  /// holds at most twice this (and the lines of one write).
  public var segmentBytes: Int
  /// How long repeated refusals are coalesced (``RefusalCoalescer``), in seconds; 0: not.
  public var coalescingWindow: Double
  /// How many refusal windows may be open at once.
  public var coalescingKeys: Int

  /// Creates limits.
  public init(segmentBytes: Int = 8 << 20, coalescingWindow: Double = 1, coalescingKeys: Int = 1024) {
    self.segmentBytes = segmentBytes
    self.coalescingWindow = coalescingWindow
    self.coalescingKeys = coalescingKeys
  }
}

/// Which logs of earlier mounts a mountpoint keeps (docs/reference.md, "Events"): the
/// newest ones, at most ``mounts`` of them and at most ``bytes`` together; the daemon
/// applies it when a new mount starts, and logs whose daemon is gone are deleted after
/// ``lifetime`` seconds whatever their number.
public struct EventLogRetention: Sendable, Hashable {
  /// Earlier mounts' logs kept per mountpoint.
  public var mounts: Int
  /// Their bytes together.
  public var bytes: Int64
  /// Seconds a log is kept after its last write once its daemon is gone.
  public var lifetime: Double

  /// Creates a rule.
  public init(mounts: Int = 4, bytes: Int64 = 32 << 20, lifetime: Double = 7 * 24 * 3600) {
    self.mounts = mounts
    self.bytes = bytes
    self.lifetime = lifetime
  }

  /// Which of `logs` (earlier mounts' logs, any order: id and bytes) to delete: all but
  /// the newest (by id, which sorts by start time) that fit in the count and the bytes;
  /// the newest is kept first, and a log that does not fit in what is left goes.
  public func logsToRemove(_ logs: [(id: String, bytes: Int64)]) -> [String] {
    var kept = 0
    var keptBytes: Int64 = 0
    var remove: [String] = []
    for log in logs.sorted(by: { $0.id > $1.id }) {
      if kept < mounts && keptBytes + log.bytes <= bytes {
        kept += 1
        keptBytes += log.bytes
      } else {
        remove.append(log.id)
      }
    }
    return remove
  }
}
