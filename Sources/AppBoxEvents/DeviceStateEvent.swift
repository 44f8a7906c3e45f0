import SandboxPolicy

/// A change of the device's lock state (`"type":"state"`).
public struct DeviceStateEvent: Sendable, Hashable, Codable {
  /// Wall-clock time of the change, in seconds since the Unix epoch.
  public var time: Double
  /// The state before the change.
  public var from: DeviceState
  /// The state after the change.
  public var to: DeviceState

  /// Creates an event.
  ///
  /// - Parameters:
  ///   - time: seconds since the Unix epoch.
  ///   - from: the state before the change.
  ///   - to: the state after the change.
  public init(time: Double, from: DeviceState, to: DeviceState) {
    self.time = time
    self.from = from
    self.to = to
  }

  /// Creates an event for a change reported by ``LockStateMachine``.
  ///
  /// - Parameters:
  ///   - time: seconds since the Unix epoch.
  ///   - change: the change.
  public init(time: Double, change: DeviceStateChange) {
    self.init(time: time, from: change.from, to: change.to)
  }

  /// The change, without its time.
  public var change: DeviceStateChange { DeviceStateChange(from: from, to: to) }

  enum CodingKeys: String, CodingKey { case type, time, from, to }

  /// Writes e.g. `{"type":"state","time":1700000000.5,"from":"UNLOCKED","to":"GRACE"}`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("state", forKey: .type)
    try container.encodeSeconds(time, forKey: .time)
    try container.encode(from.name, forKey: .from)
    try container.encode(to.name, forKey: .to)
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    time = try container.decodeSeconds(forKey: .time)
    from = try container.decodeName(.from, "state", DeviceState.init(name:))
    to = try container.decodeName(.to, "state", DeviceState.init(name:))
  }
}
