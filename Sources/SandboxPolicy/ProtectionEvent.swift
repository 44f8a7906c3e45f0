/// A Data Protection refusal, logged as one JSON Lines event (SPEC §2).
public struct ProtectionEvent: Sendable, Hashable {
  /// Wall-clock time of the refusal, in seconds since the Unix epoch.
  public var time: Double
  /// The item's path relative to the mount, as raw bytes (Linux names need not be UTF-8).
  public var pathBytes: [UInt8]
  /// The item's protection class.
  public var protectionClass: ProtectionClass
  /// The refused operation.
  public var operation: ProtectedOperation
  /// The effective device state at the refusal.
  public var state: DeviceState

  /// Creates an event from a raw byte path.
  ///
  /// - Parameters:
  ///   - time: seconds since the Unix epoch.
  ///   - pathBytes: the path's bytes.
  ///   - protectionClass: the item's class.
  ///   - operation: the refused operation.
  ///   - state: the effective device state.
  public init(
    time: Double,
    pathBytes: some Collection<UInt8>,
    protectionClass: ProtectionClass,
    operation: ProtectedOperation,
    state: DeviceState
  ) {
    self.time = time
    self.pathBytes = Array(pathBytes)
    self.protectionClass = protectionClass
    self.operation = operation
    self.state = state
  }

  /// Creates an event from a string path.
  ///
  /// - Parameters:
  ///   - time: seconds since the Unix epoch.
  ///   - path: the path.
  ///   - protectionClass: the item's class.
  ///   - operation: the refused operation.
  ///   - state: the effective device state.
  public init(
    time: Double,
    path: String,
    protectionClass: ProtectionClass,
    operation: ProtectedOperation,
    state: DeviceState
  ) {
    self.init(
      time: time, pathBytes: path.utf8, protectionClass: protectionClass,
      operation: operation, state: state)
  }

  /// The path for display: ill-formed UTF-8 replaced by U+FFFD.
  public var path: String { String(decoding: pathBytes, as: UTF8.self) }

  /// The event as one JSON object without a trailing newline, e.g.
  /// `{"type":"refusal","time":1700000000.5,"path":"Documents/a","class":"complete",`
  /// `"operation":"openExisting","state":"LOCKED"}`.
  ///
  /// `path` is the display form (``JSONText/quoted(bytes:)``). When the path is not valid
  /// UTF-8, a `"pathHex"` member follows `path` with the exact bytes in lowercase hex, so
  /// the log stays lossless.
  public var jsonLine: String {
    var line = "{\"type\":\"refusal\",\"time\":" + JSONText.number(time)
    line += ",\"path\":" + JSONText.quoted(bytes: pathBytes)
    if !JSONText.isValidUTF8(pathBytes) {
      line += ",\"pathHex\":\"" + JSONText.hex(pathBytes) + "\""
    }
    line += ",\"class\":" + JSONText.quoted(protectionClass.name)
    line += ",\"operation\":" + JSONText.quoted(operation.name)
    line += ",\"state\":" + JSONText.quoted(state.name) + "}"
    return line
  }
}
