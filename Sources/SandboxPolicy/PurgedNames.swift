/// The names purged most recently, so that the filesystem notices when the app pays for
/// a purge: it looks a purged name up and misses it, or creates it again (docs/reference.md#quota-and-purging).
///
/// Bounded: it remembers the last ``limit`` purges (older ones are forgotten first, in
/// purge order), each as its directory's backing inode number and its name (at most 255
/// bytes), with the purged bytes and the time. Every operation is O(1). A value type: the
/// filesystem keeps one under a lock.
public struct PurgedNames: Sendable {
  /// A purged name: its directory (backing inode number) and the name's bytes.
  public struct Key: Hashable, Sendable {
    /// The directory's backing inode number.
    public var directory: UInt64
    /// The name, as raw bytes.
    public var name: [UInt8]

    /// Creates a key.
    public init(directory: UInt64, name: [UInt8]) {
      self.directory = directory
      self.name = name
    }
  }

  /// What is remembered of one purge.
  public struct Record: Hashable, Sendable {
    /// The purged file's bytes (allocated, as the quota counts them).
    public var bytes: Int64
    /// When it was purged, in seconds since the Unix epoch.
    public var time: Double
    /// Whether a lookup has missed it since (counted once per purge).
    public var missed = false
  }

  /// How many purges the filesystem remembers.
  public static let defaultLimit = 4096

  /// The most purges remembered at once.
  public let limit: Int
  /// Remembered purges, with the sequence number of the purge that put them here.
  private var records: [Key: (record: Record, sequence: UInt64)] = [:]
  /// The last ``limit`` purges in order (a ring; an entry whose sequence no longer
  /// matches ``records`` was forgotten or purged again since).
  private var ring: [(key: Key, sequence: UInt64)] = []
  /// The oldest slot of ``ring`` once it is full.
  private var oldest = 0
  /// Purges remembered so far.
  private var sequence: UInt64 = 0

  /// Creates an empty memory.
  /// - Parameter limit: The most purges remembered, ≥ 1.
  public init(limit: Int = defaultLimit) {
    precondition(limit >= 1, "PurgedNames: limit \(limit)")
    self.limit = limit
  }

  /// The names remembered now.
  public var count: Int { records.count }

  /// Remembers a purge, forgetting the oldest one when ``limit`` are remembered.
  /// - Parameters:
  ///   - key: The purged name.
  ///   - bytes: Its bytes.
  ///   - time: When it was purged.
  public mutating func remember(_ key: Key, bytes: Int64, time: Double) {
    sequence += 1
    records[key] = (Record(bytes: bytes, time: time), sequence)
    if ring.count < limit {
      ring.append((key, sequence))
      return
    }
    let evicted = ring[oldest]
    if records[evicted.key]?.sequence == evicted.sequence { records[evicted.key] = nil }
    ring[oldest] = (key, sequence)
    oldest = (oldest + 1) % limit
  }

  /// A lookup missed `key`.
  /// - Returns: its purge, the first time a lookup misses it since that purge (nil after,
  ///   or for a name not remembered).
  public mutating func miss(_ key: Key) -> Record? {
    guard let entry = records[key], !entry.record.missed else { return nil }
    records[key]!.record.missed = true
    return entry.record
  }

  /// `key` was created again: it is forgotten (a later purge remembers it afresh).
  /// - Returns: its purge, or nil for a name not remembered.
  public mutating func recreate(_ key: Key) -> Record? {
    records.removeValue(forKey: key)?.record
  }
}
