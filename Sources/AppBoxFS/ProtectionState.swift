import Posix
import SandboxPolicy
import Synchronization

/// The simulated device's lock state, as the request path reads it: one atomic load.
///
/// The state machine (pure, in SandboxPolicy) says what the state is at any instant; this
/// class publishes its evaluation as a ``LockSnapshot`` whenever it changes (a lock, an
/// unlock, the end of grace, the CX timeout), so that requests never do time arithmetic.
///
/// A change is published twice: first to requests (``snapshot``: the daemon refuses from
/// then on), then, once the kernel dropped what the change closed (pages, mappings), to
/// observers (``shown``: `appbox status`, the device-state attribute), so that nothing of a
/// class that reads as closed can still be read from memory.
final class ProtectionState: Sendable {
  /// Lock order: `machine` before `counters`; neither is held across a syscall.
  private let machine: Mutex<LockStateMachine>
  private let published: Atomic<UInt8>
  private let observed: Atomic<UInt8>
  let counters = Mutex(ProtectionCounters())

  init(options: SandboxOptions) {
    let machine = LockStateMachine(
      gracePeriod: options.gracePeriod, inactivityTimeout: options.inactivityTimeout,
      startUnlocked: options.startUnlocked)
    self.machine = Mutex(machine)
    let initial = Self.encode(machine.snapshot(at: Clock.monotonic()))
    published = Atomic(initial)
    observed = Atomic(initial)
  }

  /// The state requests are judged by.
  var snapshot: LockSnapshot { Self.decode(published.load(ordering: .acquiring)) }

  /// The state observers are told: ``snapshot`` once its change has taken effect.
  var shown: LockSnapshot { Self.decode(observed.load(ordering: .acquiring)) }

  /// Tells observers `snapshot`: the change to it has taken effect.
  func show(_ snapshot: LockSnapshot) {
    observed.store(Self.encode(snapshot), ordering: .releasing)
  }

  /// Locks; returns the published change (old, new).
  func lock() -> (DeviceStateChange?, LockSnapshot, LockSnapshot) {
    update { $0.lock(at: $1) }
  }

  /// Unlocks; returns the published change (old, new).
  func unlock() -> (DeviceStateChange?, LockSnapshot, LockSnapshot) {
    update { $0.unlock(at: $1) }
  }

  /// Re-evaluates after time passed (grace end, CX timeout).
  func refresh() -> (DeviceStateChange?, LockSnapshot, LockSnapshot) {
    update { _, _ in nil }
  }

  /// Seconds from now until the next time-driven change, if any.
  var secondsUntilNextTransition: Double? {
    machine.withLock { machine in
      let now = Clock.monotonic()
      return machine.nextTransition(after: now).map { max(0, $0 - now) }
    }
  }

  private func update(
    _ body: (inout LockStateMachine, Double) -> DeviceStateChange?
  ) -> (DeviceStateChange?, LockSnapshot, LockSnapshot) {
    machine.withLock { machine in
      let now = Clock.monotonic()
      let old = Self.decode(published.load(ordering: .relaxed))
      var change = body(&machine, now)
      let new = machine.snapshot(at: now)
      if change == nil, old.state != new.state { change = DeviceStateChange(from: old.state, to: new.state) }
      published.store(Self.encode(new), ordering: .releasing)
      return (change, old, new)
    }
  }

  /// Counts a refusal of `operation` on an item of `protectionClass`.
  func recordRefusal(_ protectionClass: ProtectionClass, _ operation: ProtectedOperation) {
    counters.withLock { $0.recordRefusal(protectionClass, operation) }
  }

  private static func encode(_ snapshot: LockSnapshot) -> UInt8 {
    UInt8(DeviceState.allCases.firstIndex(of: snapshot.state)!) | (snapshot.cxExpired ? 4 : 0)
  }

  private static func decode(_ value: UInt8) -> LockSnapshot {
    LockSnapshot(state: DeviceState.allCases[Int(value & 3)], cxExpired: value & 4 != 0)
  }
}
