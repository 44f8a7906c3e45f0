/// An item whose stored Data Protection class names no class or cannot be read, and
/// which therefore counts as ``ProtectionClass/strictest``: logged once per file as one
/// JSON Lines event (docs/reference.md, Data Protection).
public struct UnreadableClassEvent: Sendable, Hashable {
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

  /// The event as one JSON object without a trailing newline, e.g.
  /// `{"type":"unreadableClass","time":1700000000.5,"path":"Documents/a",`
  /// `"attribute":"user.appbox.protection","value":"Complete","class":"complete"}`, or
  /// with `"error":"EIO"` in place of `value` when the attribute could not be read.
  ///
  /// `pathHex` and `valueHex` (lowercase hex of the exact bytes) follow `path` and `value`
  /// when those are not valid UTF-8; `value` escapes control characters, NUL included, so
  /// it is exact otherwise. `class` is the class the item counts as.
  public var jsonLine: String {
    var line = "{\"type\":\"unreadableClass\",\"time\":" + JSONText.number(time)
    line += ",\"path\":" + JSONText.quoted(bytes: pathBytes)
    if !JSONText.isValidUTF8(pathBytes) { line += ",\"pathHex\":\"" + JSONText.hex(pathBytes) + "\"" }
    line += ",\"attribute\":" + JSONText.quoted(attribute)
    if let value {
      line += ",\"value\":" + JSONText.quoted(bytes: value)
      if !JSONText.isValidUTF8(value) { line += ",\"valueHex\":\"" + JSONText.hex(value) + "\"" }
    }
    if let error { line += ",\"error\":" + JSONText.quoted(error) }
    line += ",\"class\":" + JSONText.quoted(ProtectionClass.strictest.name) + "}"
    return line
  }
}
