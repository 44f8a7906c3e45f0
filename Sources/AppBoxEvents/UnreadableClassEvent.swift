import SandboxPolicy

/// An item whose stored Data Protection class names no class or cannot be read, and which
/// therefore counts as `complete`, the strictest class (`"type":"unreadableClass"`; logged
/// once per file, docs/reference.md, "Data Protection").
public struct UnreadableClassEvent: Sendable, Hashable, Codable {
  /// At most this many bytes of the stored value are logged.
  public static let valueLimit = 256

  /// Wall-clock time, in seconds since the Unix epoch.
  public var time: Double
  /// The item's path relative to the mount, as raw bytes.
  public var pathBytes: [UInt8]
  /// The attribute that held it, on the backing store (e.g. `user.appbox.protection`).
  public var attribute: String
  /// What the attribute held (its first ``valueLimit`` bytes), when it could be read.
  public var value: [UInt8]?
  /// Why it could not be read (the errno's name, e.g. `EIO`), when it could not.
  public var error: String?

  /// Creates an event for a value that names no class (`error` nil) or for an attribute
  /// that could not be read (`value` nil).
  public init(time: Double, pathBytes: some Collection<UInt8>, attribute: String, value: [UInt8]?, error: String?) {
    self.time = time
    self.pathBytes = Array(pathBytes)
    self.attribute = attribute
    self.value = value.map { Array($0.prefix(Self.valueLimit)) }
    self.error = error
  }

  /// The class the item counts as.
  public static let countsAs = ProtectionClass.complete

  /// The path for display: ill-formed UTF-8 replaced by U+FFFD.
  public var path: String { String(decoding: pathBytes, as: UTF8.self) }

  enum CodingKeys: String, CodingKey {
    case type, time, path, pathHex, attribute, value, valueHex, error, `class`
  }

  /// Writes e.g. `{"type":"unreadableClass","time":1700000000.5,"path":"Documents/a",`
  /// `"attribute":"user.appbox.protection","value":"Complete","class":"complete"}`, or
  /// with `"error":"EIO"` in place of `value` when the attribute could not be read.
  /// `pathHex` and `valueHex` follow `path` and `value` when those are not UTF-8; `value`
  /// escapes control characters, NUL included, so it is exact otherwise.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("unreadableClass", forKey: .type)
    try container.encodeSeconds(time, forKey: .time)
    try container.encodePath(pathBytes, forKey: .path, hexKey: .pathHex)
    try container.encode(attribute, forKey: .attribute)
    if let value { try container.encodePath(value, forKey: .value, hexKey: .valueHex) }
    try container.encodeIfPresent(error, forKey: .error)
    try container.encode(Self.countsAs.name, forKey: .class)
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    time = try container.decodeSeconds(forKey: .time)
    pathBytes = try container.decodePath(forKey: .path, hexKey: .pathHex)
    attribute = try container.decode(String.self, forKey: .attribute)
    value = container.contains(.value) ? try container.decodePath(forKey: .value, hexKey: .valueHex) : nil
    error = try container.decodeIfPresent(String.self, forKey: .error)
    _ = try container.decodeName(.class, "class", ProtectionClass.named)
  }
}
