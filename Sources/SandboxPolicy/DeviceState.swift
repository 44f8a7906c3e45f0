/// The simulated device's lock state (docs/reference.md#data-protection).
public enum DeviceState: Sendable, Hashable, CaseIterable, CustomStringConvertible {
  /// Before first unlock: the device has not been unlocked since the mount.
  case bfu
  /// Unlocked: the user is using the device.
  case unlocked
  /// Locked, but still within the grace period: class A content stays accessible.
  case grace
  /// Locked and past the grace period.
  case locked

  /// The upper-case name used in status output and events: `BFU`, `UNLOCKED`, `GRACE`,
  /// `LOCKED`.
  public var name: String {
    switch self {
    case .bfu: "BFU"
    case .unlocked: "UNLOCKED"
    case .grace: "GRACE"
    case .locked: "LOCKED"
    }
  }

  /// Parses a state from its exact ``name``.
  ///
  /// - Parameter name: `BFU`, `UNLOCKED`, `GRACE` or `LOCKED`.
  public init?(name: String) {
    guard let match = Self.allCases.first(where: { $0.name == name }) else { return nil }
    self = match
  }

  /// The ``name``.
  public var description: String { name }
}
