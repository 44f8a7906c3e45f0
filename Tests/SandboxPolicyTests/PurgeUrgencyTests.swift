import Testing

@testable import SandboxPolicy

@Suite("PurgeUrgency attribute values")
struct PurgeUrgencyTests {
  static let accepted: [([UInt8], PurgeUrgency)] = [
    (Array("low".utf8), .low), (Array("medium".utf8), .medium), (Array("high".utf8), .high),
    (Array("high\n".utf8), .high), (Array("low\0".utf8), .low), (Array("medium\r\n".utf8), .medium),
    (Array("high\0\0".utf8), .high),
  ]

  @Test(arguments: accepted)
  func accepts(_ bytes: [UInt8], _ urgency: PurgeUrgency) throws {
    #expect(try PurgeUrgency.parse(attributeValue: bytes) == urgency)
  }

  static let rejected: [[UInt8]] = [
    [], Array("none".utf8), Array("HIGH".utf8), Array(" low".utf8), Array("low ".utf8),
    Array("lowest".utf8), [0xFF, 0xFE], [0], Array("hi\0gh".utf8),
  ]

  @Test(arguments: rejected)
  func rejects(_ bytes: [UInt8]) {
    #expect(throws: PurgeUrgency.ParseError.invalid(bytes)) {
      try PurgeUrgency.parse(attributeValue: bytes)
    }
  }

  @Test func orderAndValues() throws {
    #expect(PurgeUrgency.none < PurgeUrgency.low)
    #expect(PurgeUrgency.low < PurgeUrgency.medium && PurgeUrgency.medium < PurgeUrgency.high)
    #expect(PurgeUrgency.purgeOrder == [.high, .medium, .low, .none])
    #expect(PurgeUrgency.none.attributeValue == nil)
    for urgency in PurgeUrgency.allCases {
      if let value = urgency.attributeValue {
        #expect(try PurgeUrgency.parse(attributeValue: value) == urgency)
      }
    }
  }
}
