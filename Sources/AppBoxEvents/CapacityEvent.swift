import SandboxPolicy

/// A change of the sandbox's capacity while mounted (`"type":"capacity"`).
public struct CapacityEvent: Sendable, Hashable, Codable {
  /// Who changed the capacity.
  public typealias Reason = CapacityChangeReason

  /// Wall-clock time of the change, in seconds since the Unix epoch.
  public var time: Double
  /// The capacity before, in bytes.
  public var from: Int64
  /// The capacity after, in bytes.
  public var to: Int64
  /// Who changed it.
  public var reason: Reason

  /// Creates an event.
  /// - Parameters:
  ///   - time: Seconds since the Unix epoch.
  ///   - from: The capacity before, in bytes.
  ///   - to: The capacity after, in bytes.
  ///   - reason: Who changed it.
  public init(time: Double, from: Int64, to: Int64, reason: Reason) {
    self.time = time
    self.from = from
    self.to = to
    self.reason = reason
  }

  enum CodingKeys: String, CodingKey { case type, time, from, to, reason }

  /// Writes e.g. `{"type":"capacity","time":1700000000.5,"from":67108864,"to":33554432,`
  /// `"reason":"resize"}`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("capacity", forKey: .type)
    try container.encodeSeconds(time, forKey: .time)
    try container.encode(from, forKey: .from)
    try container.encode(to, forKey: .to)
    try container.encode(reason.rawValue, forKey: .reason)
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    time = try container.decodeSeconds(forKey: .time)
    from = try container.decode(Int64.self, forKey: .from)
    to = try container.decode(Int64.self, forKey: .to)
    reason = try container.decodeName(.reason, "reason", Reason.init(rawValue:))
  }
}
