/// The Data Protection access table (docs/reference.md#data-protection): which operations each class allows in
/// each device state. A refusal is answered with `EPERM`.
public enum AccessRule {
  /// Decides whether an operation on an item of a class is allowed.
  ///
  /// | Class | Operation | BFU | UNLOCKED | GRACE | LOCKED |
  /// |---|---|---|---|---|---|
  /// | A | create, open, handle I/O | no | ok | ok | no |
  /// | B | create new | ok | ok | ok | ok |
  /// | B | open existing | no | ok | ok | no |
  /// | B | handle I/O | ok | ok | ok | ok |
  /// | C | create, open, handle I/O | no | ok | ok | ok |
  /// | CX | create, open, handle I/O | no | ok | ok | ok until `cxExpired`, then no |
  /// | D | anything | ok | ok | ok | ok |
  /// | any | metadata | ok | ok | ok | ok |
  ///
  /// - Parameters:
  ///   - protectionClass: the item's class.
  ///   - operation: what is being done.
  ///   - state: the effective device state (``LockStateMachine/state(at:)``).
  ///   - cxExpired: whether the CX inactivity timeout has run out
  ///     (``LockStateMachine/cxExpired(at:)``); only consulted for CX while `LOCKED`.
  /// - Returns: `true` if allowed, `false` if it must be refused with `EPERM`.
  public static func decide(
    _ protectionClass: ProtectionClass,
    _ operation: ProtectedOperation,
    state: DeviceState,
    cxExpired: Bool
  ) -> Bool {
    if operation == .metadata { return true }
    switch protectionClass {
    case .none:
      return true
    case .complete:
      return state == .unlocked || state == .grace
    case .completeUnlessOpen:
      switch operation {
      case .createNew, .handleIO, .metadata: return true
      case .openExisting: return state == .unlocked || state == .grace
      }
    case .completeUntilFirstUserAuthentication:
      return state != .bfu
    case .completeWhenUserInactive:
      switch state {
      case .bfu: return false
      case .unlocked, .grace: return true
      case .locked: return !cxExpired
      }
    }
  }

  /// Decides an operation against a captured lock situation.
  ///
  /// - Parameters:
  ///   - protectionClass: the item's class.
  ///   - operation: what is being done.
  ///   - snapshot: the lock situation at the time of the request.
  /// - Returns: `true` if allowed, `false` if it must be refused with `EPERM`.
  public static func decide(
    _ protectionClass: ProtectionClass,
    _ operation: ProtectedOperation,
    in snapshot: LockSnapshot
  ) -> Bool {
    decide(protectionClass, operation, state: snapshot.state, cxExpired: snapshot.cxExpired)
  }

  /// Whether I/O on an open file of a class, allowed now, stays allowed whatever the
  /// device does from here on: no class loses handle I/O except A (when grace ends) and CX
  /// (when its timeout runs out), and C's only refusal, BFU, cannot come back once the
  /// device was unlocked. Such files need no check per read or write, so the kernel may
  /// serve their I/O without asking the daemon (FUSE passthrough).
  ///
  /// - Parameters:
  ///   - protectionClass: the file's class.
  ///   - snapshot: the lock situation now.
  public static func handleIOStaysAllowed(_ protectionClass: ProtectionClass, in snapshot: LockSnapshot) -> Bool {
    decide(protectionClass, .handleIO, in: snapshot) && !needsCacheFlushOnLock(protectionClass)
  }

  /// Whether an item's class may be changed now, as Apple's filesystems decide: a file's
  /// content must be accessible now (``ProtectedOperation/openExisting``) in its current
  /// class and in the new one, else `EPERM`; a directory's class is only a default for
  /// new items, and changes in any state.
  ///
  /// - Parameters:
  ///   - current: the item's class before the change.
  ///   - new: the class asked for.
  ///   - isDirectory: whether the item is a directory.
  ///   - state: the effective device state.
  ///   - cxExpired: whether the CX inactivity timeout has run out.
  /// - Returns: `true` if the change is allowed, `false` for `EPERM`.
  public static func canChangeClass(
    from current: ProtectionClass,
    to new: ProtectionClass,
    isDirectory: Bool,
    state: DeviceState,
    cxExpired: Bool
  ) -> Bool {
    isDirectory
      || (decide(current, .openExisting, state: state, cxExpired: cxExpired)
        && decide(new, .openExisting, state: state, cxExpired: cxExpired))
  }

  /// Whether content of a class can become unreadable through open handles, so that the
  /// kernel's cached pages of its files must be written back and invalidated when that
  /// happens: `true` for A and CX.
  ///
  /// - Parameter protectionClass: the class to ask about.
  public static func needsCacheFlushOnLock(_ protectionClass: ProtectionClass) -> Bool {
    switch protectionClass {
    case .complete, .completeWhenUserInactive: true
    case .completeUnlessOpen, .completeUntilFirstUserAuthentication, .none: false
    }
  }
}
