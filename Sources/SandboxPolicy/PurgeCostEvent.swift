/// The app paying for a purge, logged as one JSON Lines event: a purged name created
/// again (`recreated`) or looked up and missed (`missed`).
public struct PurgeCostEvent: Sendable, Hashable {
  /// What the app did with the purged name.
  public enum Kind: String, Sendable, Hashable, CaseIterable {
    /// Created it again (create, mknod, or a rename onto it).
    case recreated
    /// Looked it up and found it missing (the first such lookup after the purge).
    case missed
  }

  /// What the app did.
  public var kind: Kind
  /// Wall-clock time, in seconds since the Unix epoch.
  public var time: Double
  /// The path from the mount root, as raw bytes.
  public var path: [UInt8]
  /// The bytes the purged file had.
  public var purgedBytes: Int64
  /// Seconds from the purge to now.
  public var secondsSincePurge: Double

  /// Creates an event.
  public init(kind: Kind, time: Double, path: [UInt8], purgedBytes: Int64, secondsSincePurge: Double) {
    self.kind = kind
    self.time = time
    self.path = path
    self.purgedBytes = purgedBytes
    self.secondsSincePurge = secondsSincePurge
  }

  /// The event as one JSON object without a trailing newline, e.g.
  /// `{"type":"recreated","time":1700000010.5,"path":"Library/Caches/a","purgedBytes":4096,`
  /// `"secondsSincePurge":2.5}`. A path that is not UTF-8 gets a `pathHex` member, as in
  /// purge events.
  public var jsonLine: String {
    var line = "{\"type\":" + JSONText.quoted(kind.rawValue) + ",\"time\":" + JSONText.number(time)
    line += ",\"path\":" + JSONText.quoted(bytes: path)
    if !JSONText.isValidUTF8(path) { line += ",\"pathHex\":\"" + JSONText.hex(path) + "\"" }
    line += ",\"purgedBytes\":\(purgedBytes),\"secondsSincePurge\":" + JSONText.number(secondsSincePurge) + "}"
    return line
  }
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

  /// Counts an event.
  public mutating func count(_ kind: PurgeCostEvent.Kind, purgedBytes: Int64) {
    switch kind {
    case .recreated:
      recreated += 1
      recreatedBytes += purgedBytes
    case .missed:
      missed += 1
    }
  }
}
