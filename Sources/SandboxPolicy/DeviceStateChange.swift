/// A change of the effective device state, as reported by ``LockStateMachine``.
public struct DeviceStateChange: Sendable, Hashable {
  /// The state before the change.
  public var from: DeviceState
  /// The state after the change.
  public var to: DeviceState

  /// Creates a change record.
  ///
  /// - Parameters:
  ///   - from: the state before the change.
  ///   - to: the state after the change.
  public init(from: DeviceState, to: DeviceState) {
    self.from = from
    self.to = to
  }
}
