/// Who changed the capacity of a live mount.
public enum CapacityChangeReason: String, Sendable, Hashable, CaseIterable {
  /// `appbox resize`.
  case resize
  /// A step of `appbox pressure`'s schedule.
  case schedule
}
