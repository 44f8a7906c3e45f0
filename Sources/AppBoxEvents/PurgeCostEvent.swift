import SandboxPolicy

/// The app paying for a purge: a purged name created again (`"type":"recreated"`) or
/// looked up and missed (`"type":"missed"`).
public struct PurgeCostEvent: Sendable, Hashable, Codable {
  /// What the app did with the purged name.
  public typealias Kind = PurgeCostKind

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

  /// The path for display: ill-formed UTF-8 replaced by U+FFFD.
  public var displayPath: String { String(decoding: path, as: UTF8.self) }

  enum CodingKeys: String, CodingKey { case type, time, path, pathHex, purgedBytes, secondsSincePurge }

  /// Writes e.g. `{"type":"recreated","time":1700000010.5,"path":"Library/Caches/a",`
  /// `"purgedBytes":4096,"secondsSincePurge":2.5}`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(kind.rawValue, forKey: .type)
    try container.encodeSeconds(time, forKey: .time)
    try container.encodePath(path, forKey: .path, hexKey: .pathHex)
    try container.encode(purgedBytes, forKey: .purgedBytes)
    try container.encodeSeconds(secondsSincePurge, forKey: .secondsSincePurge)
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    kind = try container.decodeName(.type, "type", Kind.init(rawValue:))
    time = try container.decodeSeconds(forKey: .time)
    path = try container.decodePath(forKey: .path, hexKey: .pathHex)
    purgedBytes = try container.decode(Int64.self, forKey: .purgedBytes)
    secondsSincePurge = try container.decodeSeconds(forKey: .secondsSincePurge)
  }
}
