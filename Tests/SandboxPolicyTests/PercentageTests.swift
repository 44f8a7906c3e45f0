import Testing

@testable import SandboxPolicy

@Suite("Percentage parsing")
struct PercentageTests {
  static let accepted: [(String, Double)] = [
    ("90%", 90), ("90", 90), ("0%", 0), ("100%", 100), ("12.5%", 12.5), (" 80 % ", 80),
  ]

  @Test(arguments: accepted)
  func accepts(_ text: String, _ value: Double) throws {
    #expect(try Percentage.parse(text).value == value)
  }

  static let rejected: [(String, Percentage.ParseError)] = [
    ("", .empty), ("%", .invalid("%")), ("-5%", .invalid("-5%")), ("90%%", .invalid("90%%")),
    ("abc", .invalid("abc")), ("101%", .outOfRange("101%")), ("100.5", .outOfRange("100.5")),
    ("0.9x", .invalid("0.9x")),
  ]

  @Test(arguments: rejected)
  func rejects(_ text: String, _ error: Percentage.ParseError) {
    #expect(throws: error) { try Percentage.parse(text) }
  }

  @Test func shareOfBytes() {
    #expect(Percentage(90).of(1000) == 900)
    #expect(Percentage(12.5).of(1001) == 125)
    #expect(Percentage(100).of(Int64.max) == Int64.max)
    #expect(Percentage(90).description == "90%")
    #expect(Percentage(12.5).description == "12.5%")
  }
}
