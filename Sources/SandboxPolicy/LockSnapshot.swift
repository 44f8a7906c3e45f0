/// The lock situation evaluated at one instant: everything ``AccessRule`` needs.
public struct LockSnapshot: Sendable, Hashable {
  /// The effective device state.
  public var state: DeviceState
  /// Whether the CX inactivity timeout has run out (only meaningful while `LOCKED`).
  public var cxExpired: Bool

  /// Creates a snapshot from its parts.
  ///
  /// - Parameters:
  ///   - state: the effective device state.
  ///   - cxExpired: whether the CX inactivity timeout has run out.
  public init(state: DeviceState, cxExpired: Bool = false) {
    self.state = state
    self.cxExpired = cxExpired
  }

  /// Whether an operation on a class is allowed in this situation.
  ///
  /// - Parameters:
  ///   - protectionClass: the item's class.
  ///   - operation: what is being done.
  public func allows(_ protectionClass: ProtectionClass, _ operation: ProtectedOperation) -> Bool {
    AccessRule.decide(protectionClass, operation, in: self)
  }

  /// The classes for which an operation was allowed in `old` and is refused in `new`, in
  /// ``ProtectionClass/allCases`` order.
  ///
  /// With the default ``ProtectedOperation/handleIO`` this names the classes whose cached
  /// pages must now be flushed: A when grace ends, CX when its timeout runs out.
  ///
  /// - Parameters:
  ///   - old: the earlier evaluation.
  ///   - new: the later evaluation.
  ///   - operation: the operation to compare; `.handleIO` by default.
  public static func classesBecomingInaccessible(
    from old: LockSnapshot,
    to new: LockSnapshot,
    for operation: ProtectedOperation = .handleIO
  ) -> [ProtectionClass] {
    ProtectionClass.allCases.filter { old.allows($0, operation) && !new.allows($0, operation) }
  }
}
