import Testing

@testable import SandboxPolicy

@Suite("DurationText parsing")
struct DurationTextTests {
  static let accepted: [(String, Double)] = [
    ("30s", 30), ("5m", 300), ("2h", 7200), ("7d", 604_800), ("1h30m", 5400),
    ("250ms", 0.25), ("1.5h", 5400), ("0", 0), ("0s", 0), ("1d2h3m4s5ms", 93_784.005),
    (" 10S ", 10),
  ]

  @Test(arguments: accepted)
  func accepts(_ text: String, _ seconds: Double) throws {
    let parsed = try DurationText.parse(text)
    #expect(abs(parsed - seconds) < 1e-9)
  }

  static let rejected: [(String, DurationText.ParseError)] = [
    ("", .empty), ("30", .missingUnit("30")), ("5x", .unknownUnit(text: "5x", unit: "x")),
    ("5m1h", .unitOutOfOrder(text: "5m1h", unit: "h")),
    ("1s1s", .unitOutOfOrder(text: "1s1s", unit: "s")), ("h", .invalidNumber("h")),
    ("-5s", .invalidNumber("-5s")), ("1h 30m", .invalidNumber("1h 30m")),
    ("5 s", .invalidNumber("5 s")), ("1w", .unknownUnit(text: "1w", unit: "w")),
  ]

  @Test(arguments: rejected)
  func rejects(_ text: String, _ error: DurationText.ParseError) {
    #expect(throws: error) { try DurationText.parse(text) }
  }
}
