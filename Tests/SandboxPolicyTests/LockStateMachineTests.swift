import Testing

@testable import SandboxPolicy

@Suite("LockStateMachine")
struct LockStateMachineTests {
  @Test func startsInBFUByDefault() {
    let machine = LockStateMachine()
    #expect(machine.gracePeriod == 10)
    #expect(machine.inactivityTimeout == 60)
    #expect(machine.state(at: 0) == .bfu)
    #expect(machine.state(at: 1_000_000) == .bfu)
    #expect(!machine.hasBeenUnlocked)
    #expect(!machine.cxExpired(at: 1_000_000))
    #expect(machine.nextTransition(after: 0) == nil)
  }

  @Test func startsUnlockedWhenAsked() {
    let machine = LockStateMachine(startUnlocked: true)
    #expect(machine.state(at: 0) == .unlocked)
    #expect(machine.hasBeenUnlocked)
  }

  @Test func lockInBFUIsANoOp() {
    var machine = LockStateMachine()
    #expect(machine.lock(at: 5) == nil)
    #expect(machine.state(at: 5) == .bfu)
    #expect(machine.state(at: 500) == .bfu)
    #expect(machine.lockInstant == nil)
    #expect(machine.nextTransition(after: 5) == nil)
  }

  @Test func graceExpires() {
    var machine = LockStateMachine(gracePeriod: 10, startUnlocked: true)
    #expect(machine.lock(at: 100) == DeviceStateChange(from: .unlocked, to: .grace))
    #expect(machine.state(at: 100) == .grace)
    #expect(machine.state(at: 109.999) == .grace)
    #expect(machine.state(at: 110) == .locked)
    #expect(machine.state(at: 5000) == .locked)
  }

  @Test func lockingAgainKeepsTheFirstLockInstant() {
    var machine = LockStateMachine(gracePeriod: 10, startUnlocked: true)
    machine.lock(at: 100)
    #expect(machine.lock(at: 105) == nil)
    #expect(machine.state(at: 110) == .locked)
    #expect(machine.lock(at: 200) == nil)
    #expect(machine.lockInstant == 100)
  }

  @Test func zeroGraceLocksAtOnce() {
    var machine = LockStateMachine(gracePeriod: 0, startUnlocked: true)
    #expect(machine.lock(at: 3) == DeviceStateChange(from: .unlocked, to: .locked))
    #expect(machine.state(at: 3) == .locked)
    #expect(machine.nextTransition(after: 3) == 63.0)
  }

  @Test(
    "unlock from each state",
    arguments: [DeviceState.bfu, .unlocked, .grace, .locked])
  func unlockFrom(_ start: DeviceState) {
    var machine = LockStateMachine(gracePeriod: 10, inactivityTimeout: 20)
    var now = 0.0
    switch start {
    case .bfu:
      break
    case .unlocked:
      machine.unlock(at: now)
    case .grace:
      machine.unlock(at: now)
      machine.lock(at: now)
      now = 5
    case .locked:
      machine.unlock(at: now)
      machine.lock(at: now)
      now = 30
    }
    #expect(machine.state(at: now) == start)
    let change = machine.unlock(at: now)
    #expect(change == (start == .unlocked ? nil : DeviceStateChange(from: start, to: .unlocked)))
    #expect(machine.state(at: now) == .unlocked)
    #expect(machine.state(at: now + 1000) == .unlocked)
    #expect(machine.hasBeenUnlocked)
    #expect(!machine.cxExpired(at: now + 1000))
    #expect(machine.nextTransition(after: now) == nil)
  }

  @Test func cxExpiresAndResetsOnUnlock() {
    var machine = LockStateMachine(gracePeriod: 10, inactivityTimeout: 60, startUnlocked: true)
    machine.lock(at: 100)
    #expect(!machine.cxExpired(at: 100))
    #expect(!machine.cxExpired(at: 159.5))
    #expect(machine.cxExpired(at: 160))
    #expect(machine.snapshot(at: 160) == LockSnapshot(state: .locked, cxExpired: true))
    #expect(
      !AccessRule.decide(.completeWhenUserInactive, .openExisting, in: machine.snapshot(at: 160)))
    #expect(
      AccessRule.decide(.completeWhenUserInactive, .openExisting, in: machine.snapshot(at: 150)))

    machine.unlock(at: 200)
    #expect(!machine.cxExpired(at: 200))
    #expect(AccessRule.decide(.completeWhenUserInactive, .handleIO, in: machine.snapshot(at: 200)))

    // The count restarts from the next lock.
    machine.lock(at: 300)
    #expect(!machine.cxExpired(at: 359))
    #expect(machine.cxExpired(at: 360))
  }

  @Test func nextTransitionReportsGraceEndThenCXExpiry() {
    var machine = LockStateMachine(gracePeriod: 10, inactivityTimeout: 60, startUnlocked: true)
    #expect(machine.nextTransition(after: 0) == nil)
    machine.lock(at: 100)
    #expect(machine.nextTransition(after: 100) == 110)
    #expect(machine.nextTransition(after: 109.5) == 110)
    #expect(machine.nextTransition(after: 110) == 160)
    #expect(machine.nextTransition(after: 160) == nil)
    #expect(machine.nextTransition(after: 1e9) == nil)

    // The reported instants are exactly where access decisions flip.
    let beforeGraceEnd = machine.snapshot(at: 109.999)
    let atGraceEnd = machine.snapshot(at: 110)
    #expect(
      LockSnapshot.classesBecomingInaccessible(from: beforeGraceEnd, to: atGraceEnd)
        == [.complete])
    let atCXEnd = machine.snapshot(at: 160)
    #expect(
      LockSnapshot.classesBecomingInaccessible(from: machine.snapshot(at: 159.999), to: atCXEnd)
        == [.completeWhenUserInactive])
  }

  @Test func cxTimeoutShorterThanGraceTakesEffectAtGraceEnd() {
    var machine = LockStateMachine(gracePeriod: 10, inactivityTimeout: 4, startUnlocked: true)
    machine.lock(at: 0)
    #expect(machine.nextTransition(after: 0) == 10)
    #expect(machine.nextTransition(after: 10) == nil)
    #expect(AccessRule.decide(.completeWhenUserInactive, .handleIO, in: machine.snapshot(at: 5)))
    #expect(
      LockSnapshot.classesBecomingInaccessible(
        from: machine.snapshot(at: 9.5), to: machine.snapshot(at: 10))
        == [.complete, .completeWhenUserInactive])
  }

  @Test func infiniteDurationsNeverTransition() {
    var machine = LockStateMachine(
      gracePeriod: .infinity, inactivityTimeout: .infinity, startUnlocked: true)
    machine.lock(at: 0)
    #expect(machine.state(at: 1e12) == .grace)
    #expect(!machine.cxExpired(at: 1e12))
    #expect(machine.nextTransition(after: 0) == nil)

    var noCX = LockStateMachine(gracePeriod: 1, inactivityTimeout: .infinity, startUnlocked: true)
    noCX.lock(at: 0)
    #expect(noCX.nextTransition(after: 0) == 1)
    #expect(noCX.nextTransition(after: 1) == nil)
  }

  @Test func fractionalInstantsAreConsistentWithNextTransition() {
    var machine = LockStateMachine(gracePeriod: 0.2, inactivityTimeout: 0.7, startUnlocked: true)
    machine.lock(at: 0.1)
    let graceEnd = machine.nextTransition(after: 0.1)!
    #expect(machine.state(at: graceEnd) == .locked)
    #expect(machine.state(at: graceEnd.nextDown) == .grace)
    let cxEnd = machine.nextTransition(after: graceEnd)!
    #expect(machine.cxExpired(at: cxEnd))
    #expect(!machine.cxExpired(at: cxEnd.nextDown))
  }

  @Test func instantBeforeLockCountsAsLockInstant() {
    var machine = LockStateMachine(gracePeriod: 0, startUnlocked: true)
    machine.lock(at: 50)
    #expect(machine.state(at: 49) == .locked)
  }
}
