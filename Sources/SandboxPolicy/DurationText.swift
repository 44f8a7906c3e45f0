/// Parsing of durations as given in options such as `--purge-older-than 7d`.
///
/// A duration is one or more `number unit` parts with units `d` (days), `h`, `m`, `s` and
/// `ms`, each at most once and from largest to smallest: `30s`, `5m`, `2h`, `7d`, `1h30m`,
/// `250ms`, `1.5h`. A lone `0` is accepted as zero.
public enum DurationText {
  /// Why a text is not a duration.
  public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text is empty or only white space.
    case empty
    /// A part does not start with a decimal number.
    case invalidNumber(String)
    /// A number has no unit after it.
    case missingUnit(String)
    /// A unit is not one of `d`, `h`, `m`, `s`, `ms`.
    case unknownUnit(text: String, unit: String)
    /// A unit appears twice or after a smaller unit (as in `5m1h`).
    case unitOutOfOrder(text: String, unit: String)

    /// A message that says what was wrong and what to write instead.
    public var description: String {
      let hint = "write a number with a unit d, h, m, s or ms, e.g. 30s, 5m, 7d or 1h30m"
      switch self {
      case .empty:
        return "empty duration: \(hint)"
      case .invalidNumber(let text):
        return "'\(text)' is not a duration: \(hint)"
      case .missingUnit(let text):
        return "'\(text)' has no unit: \(hint)"
      case .unknownUnit(let text, let unit):
        return "'\(text)' is not a duration: unknown unit '\(unit)'; \(hint)"
      case .unitOutOfOrder(let text, let unit):
        return "'\(text)' is not a duration: unit '\(unit)' repeated or out of order; "
          + "write units from largest to smallest, each once, e.g. 1h30m"
      }
    }
  }

  /// The accepted units, largest first, with their length in seconds.
  private static let units: [(name: String, seconds: Double)] = [
    ("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1), ("ms", 0.001),
  ]

  /// Parses a duration such as `30s`, `5m`, `2h`, `7d`, `1h30m` or `250ms`.
  /// - Parameter text: The text to parse; surrounding white space is ignored, units are
  ///   case-insensitive.
  /// - Returns: The duration in seconds.
  /// - Throws: `DurationText.ParseError` saying what is wrong with the text.
  public static func parse(_ text: String) throws(ParseError) -> Double {
    let trimmed = TextScanner.trimmed(text)
    if trimmed.isEmpty { throw .empty }
    if trimmed == "0" { return 0 }
    var scanner = TextScanner(trimmed)
    var total = 0.0
    var nextAllowedUnit = 0
    while !scanner.isAtEnd {
      guard let number = scanner.decimal() else { throw .invalidNumber(text) }
      let unit = scanner.letters()
      if unit.isEmpty {
        throw scanner.isAtEnd ? .missingUnit(text) : .invalidNumber(text)
      }
      guard let index = units.firstIndex(where: { $0.name == unit }) else {
        throw .unknownUnit(text: text, unit: unit)
      }
      guard index >= nextAllowedUnit else { throw .unitOutOfOrder(text: text, unit: unit) }
      nextAllowedUnit = index + 1
      total += number.doubleValue * units[index].seconds
    }
    return total
  }
}
