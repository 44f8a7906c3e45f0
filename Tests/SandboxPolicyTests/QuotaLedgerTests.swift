import Testing

@testable import SandboxPolicy

@Suite("QuotaLedger and WaterMarks")
struct QuotaLedgerTests {
  @Test func usageAndFree() {
    var ledger = QuotaLedger(capacity: 1000)
    ledger.charge(domain: .documents, delta: 300)
    ledger.charge(domain: .caches, delta: 200)
    ledger.charge(domain: .caches, delta: -50)
    #expect(ledger.usage(.documents) == 300)
    #expect(ledger.usage(.caches) == 150)
    #expect(ledger.usage(.tmp) == 0)
    #expect(ledger.used == 450)
    #expect(ledger.free == 550)
    #expect(ledger.shortfall(for: 500) == 0)
    #expect(ledger.shortfall(for: 600) == 50)
    ledger.capacity = 400
    #expect(ledger.free == 0)
    #expect(ledger.shortfall(for: 1) == 1)
  }

  @Test func availableCapacities() {
    var ledger = QuotaLedger(capacity: 1000)
    ledger.charge(domain: .caches, delta: 300)
    ledger.charge(domain: .tmp, delta: 100)
    #expect(ledger.importantAvailableCapacity(purgeable: 400) == 1000)
    #expect(ledger.opportunisticAvailableCapacity(purgeableTmp: 100) == 700)
    #expect(
      ledger.opportunisticAvailableCapacity(purgeableTmp: 100)
        <= ledger.importantAvailableCapacity(purgeable: 400))
  }

  static let marks: [(used: Int64, expected: Int64)] = [
    (0, 0), (900, 0), (901, 101), (1000, 200), (1100, 300),
  ]

  @Test(arguments: marks)
  func backgroundPurge(used: Int64, expected: Int64) throws {
    let marks = try WaterMarks(high: Percentage(90), low: Percentage(80))
    var ledger = QuotaLedger(capacity: 1000)
    ledger.charge(domain: .caches, delta: used)
    #expect(marks.needsBackgroundPurge(ledger) == expected)
  }

  @Test func lowAboveHighIsRejected() {
    #expect(throws: WaterMarks.Error.lowAboveHigh(low: Percentage(95), high: Percentage(90))) {
      try WaterMarks(high: Percentage(90), low: Percentage(95))
    }
  }
}
