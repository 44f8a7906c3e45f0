import Testing

@testable import SandboxPolicy

/// One cell of the Data Protection table (docs/reference.md#data-protection).
struct AccessCase: Sendable, CustomTestStringConvertible {
  var protectionClass: ProtectionClass
  var operation: ProtectedOperation
  var state: DeviceState
  var cxExpired: Bool
  var allowed: Bool

  var testDescription: String {
    "\(protectionClass.letter) \(operation.name) \(state.name) cxExpired=\(cxExpired)"
      + " → \(allowed ? "ok" : "EPERM")"
  }
}

@Suite("AccessRule")
struct AccessRuleTests {
  // The Data Protection table, written out by hand. Columns: BFU, UNLOCKED, GRACE, LOCKED;
  // "+" = ok, "-" = EPERM. Keys: class letter and operation name.
  static let tableCXNotExpired: [String: String] = [
    "A createNew": "-++-", "A openExisting": "-++-", "A handleIO": "-++-",
    "A metadata": "++++",
    "B createNew": "++++", "B openExisting": "-++-", "B handleIO": "++++",
    "B metadata": "++++",
    "C createNew": "-+++", "C openExisting": "-+++", "C handleIO": "-+++",
    "C metadata": "++++",
    "CX createNew": "-+++", "CX openExisting": "-+++", "CX handleIO": "-+++",
    "CX metadata": "++++",
    "D createNew": "++++", "D openExisting": "++++", "D handleIO": "++++",
    "D metadata": "++++",
  ]

  // Same table once the CX inactivity timeout has run out: only CX changes (as A).
  static let tableCXExpired: [String: String] = [
    "A createNew": "-++-", "A openExisting": "-++-", "A handleIO": "-++-",
    "A metadata": "++++",
    "B createNew": "++++", "B openExisting": "-++-", "B handleIO": "++++",
    "B metadata": "++++",
    "C createNew": "-+++", "C openExisting": "-+++", "C handleIO": "-+++",
    "C metadata": "++++",
    "CX createNew": "-++-", "CX openExisting": "-++-", "CX handleIO": "-++-",
    "CX metadata": "++++",
    "D createNew": "++++", "D openExisting": "++++", "D handleIO": "++++",
    "D metadata": "++++",
  ]

  static let stateColumns: [DeviceState] = [.bfu, .unlocked, .grace, .locked]

  static let allCases: [AccessCase] = {
    var cases: [AccessCase] = []
    for cxExpired in [false, true] {
      let table = cxExpired ? tableCXExpired : tableCXNotExpired
      precondition(table.count == 20, "table must list 5 classes × 4 operations")
      for protectionClass in ProtectionClass.allCases {
        for operation in ProtectedOperation.allCases {
          let row = Array(table["\(protectionClass.letter) \(operation.name)"]!)
          for (column, state) in stateColumns.enumerated() {
            cases.append(
              AccessCase(
                protectionClass: protectionClass, operation: operation, state: state,
                cxExpired: cxExpired, allowed: row[column] == "+"))
          }
        }
      }
    }
    return cases
  }()

  @Test("every class × operation × state × cxExpired", arguments: allCases)
  func decideMatchesTable(_ cell: AccessCase) {
    #expect(
      AccessRule.decide(
        cell.protectionClass, cell.operation, state: cell.state, cxExpired: cell.cxExpired)
        == cell.allowed)
    let snapshot = LockSnapshot(state: cell.state, cxExpired: cell.cxExpired)
    #expect(snapshot.allows(cell.protectionClass, cell.operation) == cell.allowed)
  }

  @Test func tableCoversEveryCombination() {
    #expect(Self.allCases.count == 5 * 4 * 4 * 2)
  }

  @Test(
    "changing a file's class needs its current and its new class open-able now",
    arguments: [
      (ProtectionClass.complete, ProtectionClass.none, DeviceState.locked, false, false),
      (.complete, .none, .grace, false, true),
      (.complete, .none, .bfu, false, false),
      (.completeUnlessOpen, .none, .locked, false, false),
      (.completeUnlessOpen, .none, .unlocked, false, true),
      (.completeUntilFirstUserAuthentication, .none, .bfu, false, false),
      (.completeUntilFirstUserAuthentication, .none, .locked, true, true),
      (.completeWhenUserInactive, .none, .locked, false, true),
      (.completeWhenUserInactive, .none, .locked, true, false),
      (.completeWhenUserInactive, .none, .grace, true, true),
      (ProtectionClass.none, .none, .bfu, true, true),
      // To a class closed now: refused, as on a device.
      (ProtectionClass.none, .complete, .locked, false, false),
      (ProtectionClass.none, .completeUnlessOpen, .locked, false, false),
      (.completeUntilFirstUserAuthentication, .complete, .locked, false, false),
      (.completeWhenUserInactive, .complete, .locked, false, false),
      (ProtectionClass.none, .completeUntilFirstUserAuthentication, .bfu, false, false),
      (ProtectionClass.none, .completeWhenUserInactive, .bfu, false, false),
      (ProtectionClass.none, .completeWhenUserInactive, .locked, true, false),
      (ProtectionClass.none, .completeWhenUserInactive, .locked, false, true),
      (ProtectionClass.none, .complete, .grace, false, true),
      (ProtectionClass.none, .complete, .unlocked, false, true),
    ])
  func canChangeFileClass(
    _ current: ProtectionClass, _ new: ProtectionClass, _ state: DeviceState, _ cxExpired: Bool, _ expected: Bool
  ) {
    #expect(
      AccessRule.canChangeClass(from: current, to: new, isDirectory: false, state: state, cxExpired: cxExpired)
        == expected)
  }

  @Test(
    "a directory's class changes in every state: it is only a default for new items",
    arguments: DeviceState.allCases)
  func canChangeDirectoryClass(_ state: DeviceState) {
    for current in ProtectionClass.allCases {
      for new in ProtectionClass.allCases {
        #expect(
          AccessRule.canChangeClass(from: current, to: new, isDirectory: true, state: state, cxExpired: true))
      }
    }
  }

  @Test(
    "cache flush on lock only for A and CX",
    arguments: [
      (ProtectionClass.complete, true),
      (.completeUnlessOpen, false),
      (.completeUntilFirstUserAuthentication, false),
      (.completeWhenUserInactive, true),
      (ProtectionClass.none, false),
    ])
  func needsCacheFlush(_ protectionClass: ProtectionClass, _ expected: Bool) {
    #expect(AccessRule.needsCacheFlushOnLock(protectionClass) == expected)
  }

  @Test("handle I/O stays allowed for B, C and D once allowed; never for A and CX")
  func handleIOStaysAllowed() {
    for state in DeviceState.allCases {
      for cxExpired in [false, true] {
        let snapshot = LockSnapshot(state: state, cxExpired: cxExpired)
        #expect(AccessRule.handleIOStaysAllowed(.none, in: snapshot))
        #expect(AccessRule.handleIOStaysAllowed(.completeUnlessOpen, in: snapshot))
        #expect(AccessRule.handleIOStaysAllowed(.completeUntilFirstUserAuthentication, in: snapshot) == (state != .bfu))
        #expect(!AccessRule.handleIOStaysAllowed(.complete, in: snapshot))
        #expect(!AccessRule.handleIOStaysAllowed(.completeWhenUserInactive, in: snapshot))
      }
    }
  }

  @Test func classesBecomingInaccessible() {
    let unlocked = LockSnapshot(state: .unlocked)
    let grace = LockSnapshot(state: .grace)
    let locked = LockSnapshot(state: .locked, cxExpired: false)
    let lockedExpired = LockSnapshot(state: .locked, cxExpired: true)
    #expect(LockSnapshot.classesBecomingInaccessible(from: unlocked, to: grace) == [])
    #expect(LockSnapshot.classesBecomingInaccessible(from: grace, to: locked) == [.complete])
    #expect(
      LockSnapshot.classesBecomingInaccessible(from: locked, to: lockedExpired)
        == [.completeWhenUserInactive])
    #expect(
      LockSnapshot.classesBecomingInaccessible(from: grace, to: lockedExpired)
        == [.complete, .completeWhenUserInactive])
    #expect(LockSnapshot.classesBecomingInaccessible(from: lockedExpired, to: unlocked) == [])
    #expect(
      LockSnapshot.classesBecomingInaccessible(from: grace, to: locked, for: .openExisting)
        == [.complete, .completeUnlessOpen])
  }
}
