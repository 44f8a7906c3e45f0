import Testing

@testable import SandboxPolicy

@Suite("ProtectionClass")
struct ProtectionClassTests {
  static let accepted: [(String, ProtectionClass)] = [
    ("complete", .complete),
    ("completeUnlessOpen", .completeUnlessOpen),
    ("completeUntilFirstUserAuthentication", .completeUntilFirstUserAuthentication),
    ("completeWhenUserInactive", .completeWhenUserInactive),
    ("none", ProtectionClass.none),
    ("NSFileProtectionComplete", .complete),
    ("NSFileProtectionCompleteUnlessOpen", .completeUnlessOpen),
    ("NSFileProtectionCompleteUntilFirstUserAuthentication", .completeUntilFirstUserAuthentication),
    ("NSFileProtectionCompleteWhenUserInactive", .completeWhenUserInactive),
    ("NSFileProtectionNone", ProtectionClass.none),
    ("A", .complete), ("a", .complete),
    ("B", .completeUnlessOpen), ("b", .completeUnlessOpen),
    ("C", .completeUntilFirstUserAuthentication), ("c", .completeUntilFirstUserAuthentication),
    ("CX", .completeWhenUserInactive), ("cx", .completeWhenUserInactive),
    ("Cx", .completeWhenUserInactive), ("cX", .completeWhenUserInactive),
    ("D", ProtectionClass.none), ("d", ProtectionClass.none),
    ("1", .complete), ("2", .completeUnlessOpen), ("3", .completeUntilFirstUserAuthentication),
    ("4", ProtectionClass.none), ("7", .completeWhenUserInactive),
  ]

  static let rejected: [String] = [
    "", "E", "e", "X", "CC", "CXX", "AB", "complete ", " complete", "0", "5", "6", "8", "9",
    "01", "07", "+1", "-1", "10", "NSFileProtection", "COMPLETE", "Complete", "NONE",
    "None", "nsfileprotectioncomplete", "NSFileProtectionComplete ", "completeunlessopen",
    "A\n\n", "A\0\0", "A\n\0", "\n", "\0", "A\r\n", "A\r", "\nA", "\0A", "A\t", "完全",
  ]

  @Test("accepts every spelling", arguments: accepted)
  func acceptsSpelling(_ text: String, _ expected: ProtectionClass) {
    #expect(ProtectionClass(parsing: text) == expected)
    #expect(ProtectionClass(parsing: Array(text.utf8)) == expected)
    #expect(ProtectionClass(parsing: text + "\n") == expected)
    #expect(ProtectionClass(parsing: text + "\0") == expected)
    #expect(ProtectionClass(parsing: Array(text.utf8) + [0]) == expected)
    #expect(ProtectionClass(parsing: Array(text.utf8)[...]) == expected)
  }

  @Test("rejects everything else", arguments: rejected)
  func rejects(_ text: String) {
    #expect(ProtectionClass(parsing: text) == nil)
    #expect(ProtectionClass(parsing: Array(text.utf8)) == nil)
  }

  @Test func rejectsInvalidUTF8() {
    #expect(ProtectionClass(parsing: [0xFF]) == nil)
    #expect(ProtectionClass(parsing: [0x41, 0xFF]) == nil)
    #expect(ProtectionClass(parsing: [UInt8]()) == nil)
  }

  @Test(
    "names, letters and numbers",
    arguments: [
      (ProtectionClass.complete, "complete", "A", 1),
      (.completeUnlessOpen, "completeUnlessOpen", "B", 2),
      (.completeUntilFirstUserAuthentication, "completeUntilFirstUserAuthentication", "C", 3),
      (.completeWhenUserInactive, "completeWhenUserInactive", "CX", 7),
      (ProtectionClass.none, "none", "D", 4),
    ])
  func properties(_ value: ProtectionClass, _ name: String, _ letter: String, _ number: Int) {
    #expect(value.name == name)
    #expect(value.description == name)
    #expect(value.letter == letter)
    #expect(value.appleNumber == number)
  }

  @Test("every spelling a class produces parses back", arguments: ProtectionClass.allCases)
  func roundTrip(_ value: ProtectionClass) {
    #expect(ProtectionClass(parsing: value.name) == value)
    #expect(ProtectionClass(parsing: value.foundationName) == value)
    #expect(ProtectionClass(parsing: value.letter) == value)
    #expect(ProtectionClass(parsing: String(value.appleNumber)) == value)
  }

  @Test func containerDefaultIsC() {
    #expect(ProtectionClass.containerDefault == .completeUntilFirstUserAuthentication)
  }

  @Test func deviceStateNames() {
    #expect(DeviceState.allCases.map(\.name) == ["BFU", "UNLOCKED", "GRACE", "LOCKED"])
    for state in DeviceState.allCases {
      #expect(DeviceState(name: state.name) == state)
    }
    #expect(DeviceState(name: "locked") == nil)
  }

  @Test func operationNames() {
    #expect(
      ProtectedOperation.allCases.map(\.name)
        == ["createNew", "openExisting", "handleIO", "metadata"])
  }
}
