import SandboxPolicy

/// A Data Protection refusal (`"type":"refusal"`; docs/reference.md, "Data Protection").
///
/// Repeated refusals are coalesced (``RefusalCoalescer``): the first of a storm is written
/// at once as an event of its own; the ones after it with the same path, class, operation
/// and state within the window become one event whose ``count`` says how many, ``time``
/// when the first of them and ``last`` when the last happened.
public struct ProtectionEvent: Sendable, Hashable, Codable {
  /// Wall-clock time of the refusal (the first, when coalesced), in seconds since the
  /// Unix epoch.
  public var time: Double
  /// The item's path relative to the mount, as raw bytes (Linux names need not be UTF-8).
  public var pathBytes: [UInt8]
  /// The item's protection class.
  public var protectionClass: ProtectionClass
  /// The refused operation.
  public var operation: ProtectedOperation
  /// The effective device state at the refusal.
  public var state: DeviceState
  /// How many refusals this event stands for (1 unless coalesced).
  public var count: Int
  /// When the last of them happened (nil unless coalesced).
  public var last: Double?
  /// On a device: the item's container (a bundle or group id).
  public var container: String? = nil

  /// Creates an event from a raw byte path.
  ///
  /// - Parameters:
  ///   - time: seconds since the Unix epoch.
  ///   - pathBytes: the path's bytes.
  ///   - protectionClass: the item's class.
  ///   - operation: the refused operation.
  ///   - state: the effective device state.
  ///   - count: how many refusals the event stands for.
  ///   - last: when the last of them happened.
  public init(
    time: Double,
    pathBytes: some Collection<UInt8>,
    protectionClass: ProtectionClass,
    operation: ProtectedOperation,
    state: DeviceState,
    count: Int = 1,
    last: Double? = nil
  ) {
    self.time = time
    self.pathBytes = Array(pathBytes)
    self.protectionClass = protectionClass
    self.operation = operation
    self.state = state
    self.count = count
    self.last = last
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

  enum CodingKeys: String, CodingKey {
    case type, time, path, pathHex, `class`, operation, state, count, last, container
  }

  /// Writes e.g. `{"type":"refusal","time":1700000000.5,"path":"Documents/a",`
  /// `"class":"complete","operation":"openExisting","state":"LOCKED"}`; a coalesced
  /// event adds `"count":N,"last":T`, and one on a device `"container"`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("refusal", forKey: .type)
    try container.encodeSeconds(time, forKey: .time)
    try container.encodePath(pathBytes, forKey: .path, hexKey: .pathHex)
    try container.encode(protectionClass.name, forKey: .class)
    try container.encode(operation.name, forKey: .operation)
    try container.encode(state.name, forKey: .state)
    if count != 1 {
      try container.encode(count, forKey: .count)
      try container.encodeSeconds(last ?? time, forKey: .last)
    }
    if let owner = self.container { try container.encode(owner, forKey: .container) }
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    time = try container.decodeSeconds(forKey: .time)
    pathBytes = try container.decodePath(forKey: .path, hexKey: .pathHex)
    protectionClass = try container.decodeName(.class, "class", ProtectionClass.named)
    operation = try container.decodeName(.operation, "operation", ProtectedOperation.named)
    state = try container.decodeName(.state, "state", DeviceState.init(name:))
    count = try container.decodeIfPresent(Int.self, forKey: .count) ?? 1
    guard count >= 1 else {
      throw DecodingError.dataCorrupted(.init(codingPath: [CodingKeys.count], debugDescription: "below 1"))
    }
    last = container.contains(.last) ? try container.decodeSeconds(forKey: .last) : nil
    self.container = try container.decodeIfPresent(String.self, forKey: .container)
  }
}
