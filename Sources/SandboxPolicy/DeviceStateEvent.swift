/// A device state change, logged as one JSON Lines event.
public struct DeviceStateEvent: Sendable, Hashable {
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

  /// The event as one JSON object without a trailing newline, e.g.
  /// `{"type":"state","time":1700000000.5,"from":"UNLOCKED","to":"GRACE"}`.
  public var jsonLine: String {
    "{\"type\":\"state\",\"time\":" + JSONText.number(time) + ",\"from\":"
      + JSONText.quoted(from.name) + ",\"to\":" + JSONText.quoted(to.name) + "}"
  }
}
