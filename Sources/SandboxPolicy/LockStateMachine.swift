/// The simulated device's lock state over time (docs/reference.md#data-protection).
///
/// Time is a plain `Double` of seconds on a monotonic clock chosen by the caller (for
/// example seconds since the mount, from `ContinuousClock`); the machine never reads a
/// clock itself. Instants passed to successive calls must not decrease; an instant before
/// the last lock is treated as the lock instant.
///
/// Only ``lock(at:)`` and ``unlock(at:)`` change the stored state. The passage of time
/// turns GRACE into LOCKED and expires CX, which ``state(at:)`` and ``cxExpired(at:)``
/// evaluate; ``nextTransition(after:)`` tells when the next such change happens.
///
/// Boundaries are inclusive: at exactly `lockInstant + gracePeriod` the state is LOCKED,
/// and at exactly `lockInstant + inactivityTimeout` CX has expired.
public struct LockStateMachine: Sendable, Hashable {
  /// Seconds after a lock during which the device is in GRACE (class A still accessible).
  /// 0 locks straight to LOCKED; `.infinity` never leaves GRACE.
  public let gracePeriod: Double

  /// Seconds the device must have been locked (counted from the lock itself, not from the
  /// end of grace: the user has been inactive since the lock) before class CX content
  /// becomes inaccessible like class A. Since CX is accessible during GRACE anyway, CX
  /// access effectively ends at the later of grace end and this timeout. Unlocking restores
  /// access and restarts the count at the next lock. `.infinity` never expires CX.
  public let inactivityTimeout: Double

  /// Whether the device has been unlocked at least once (it has left BFU for good).
  public private(set) var hasBeenUnlocked: Bool

  /// The instant of the lock currently in force, or `nil` while BFU or UNLOCKED.
  public private(set) var lockInstant: Double?

  /// The default grace period: 10 seconds.
  public static let defaultGracePeriod: Double = 10

  /// The default CX inactivity timeout: 60 seconds.
  public static let defaultInactivityTimeout: Double = 60

  /// Creates a machine in BFU, or UNLOCKED if asked.
  ///
  /// - Parameters:
  ///   - gracePeriod: seconds in GRACE after a lock; must be ≥ 0 (may be `.infinity`).
  ///   - inactivityTimeout: seconds locked before CX expires; must be ≥ 0 (may be
  ///     `.infinity`).
  ///   - startUnlocked: start UNLOCKED (as if unlocked once) instead of BFU.
  /// - Precondition: neither duration is negative or NaN; validate user input first.
  public init(
    gracePeriod: Double = LockStateMachine.defaultGracePeriod,
    inactivityTimeout: Double = LockStateMachine.defaultInactivityTimeout,
    startUnlocked: Bool = false
  ) {
    precondition(gracePeriod >= 0, "gracePeriod must be >= 0 and not NaN")
    precondition(inactivityTimeout >= 0, "inactivityTimeout must be >= 0 and not NaN")
    self.gracePeriod = gracePeriod
    self.inactivityTimeout = inactivityTimeout
    self.hasBeenUnlocked = startUnlocked
    self.lockInstant = nil
  }

  // MARK: - Commands

  /// Locks the device: UNLOCKED becomes GRACE (or LOCKED at once with a zero grace period).
  ///
  /// In BFU this does nothing (the device is already as locked as it gets); in GRACE or
  /// LOCKED it does nothing either, so the grace period and CX timeout keep counting from
  /// the first lock.
  ///
  /// - Parameter now: the current monotonic instant, in seconds.
  /// - Returns: the state change, or `nil` if nothing changed.
  @discardableResult
  public mutating func lock(at now: Double) -> DeviceStateChange? {
    guard hasBeenUnlocked, lockInstant == nil else { return nil }
    lockInstant = now
    return DeviceStateChange(from: .unlocked, to: state(at: now))
  }

  /// Unlocks the device from any state; records that the first unlock happened and
  /// restores CX access.
  ///
  /// - Parameter now: the current monotonic instant, in seconds.
  /// - Returns: the state change, or `nil` if the device was already UNLOCKED.
  @discardableResult
  public mutating func unlock(at now: Double) -> DeviceStateChange? {
    let old = state(at: now)
    hasBeenUnlocked = true
    lockInstant = nil
    return old == .unlocked ? nil : DeviceStateChange(from: old, to: .unlocked)
  }

  // MARK: - Evaluation

  /// The effective state at an instant: GRACE has turned into LOCKED once the grace period
  /// has elapsed.
  ///
  /// - Parameter now: the current monotonic instant, in seconds.
  public func state(at now: Double) -> DeviceState {
    guard hasBeenUnlocked else { return .bfu }
    guard let lockInstant else { return .unlocked }
    return max(now, lockInstant) >= lockInstant + gracePeriod ? .locked : .grace
  }

  /// Whether the device has been locked for at least ``inactivityTimeout`` at an instant.
  /// Always `false` while BFU or UNLOCKED.
  ///
  /// - Parameter now: the current monotonic instant, in seconds.
  public func cxExpired(at now: Double) -> Bool {
    guard let lockInstant else { return false }
    return max(now, lockInstant) >= lockInstant + inactivityTimeout
  }

  /// The state and CX expiry at an instant, for ``AccessRule``.
  ///
  /// - Parameter now: the current monotonic instant, in seconds.
  public func snapshot(at now: Double) -> LockSnapshot {
    LockSnapshot(state: state(at: now), cxExpired: cxExpired(at: now))
  }

  /// The first instant strictly after `now` at which an access decision changes without a
  /// command: the end of GRACE (class A becomes inaccessible) or the effective CX expiry
  /// (the later of grace end and the inactivity timeout). A daemon schedules cache
  /// invalidation for that instant.
  ///
  /// - Parameter now: the current monotonic instant, in seconds.
  /// - Returns: the instant, or `nil` if nothing changes until the next command.
  public func nextTransition(after now: Double) -> Double? {
    guard let lockInstant else { return nil }
    let graceEnd = lockInstant + gracePeriod
    let cxEnd = max(graceEnd, lockInstant + inactivityTimeout)
    return [graceEnd, cxEnd].filter { $0 > now && $0.isFinite }.min()
  }
}
