/// A percentage from 0 to 100, as given in options such as `--high-water 90%`.
public struct Percentage: Hashable, Comparable, Sendable, CustomStringConvertible {
  /// The percentage, from 0 through 100.
  public let value: Double

  /// Creates a percentage.
  /// - Parameter value: The percentage, from 0 through 100.
  /// - Precondition: `value` is within 0...100.
  public init(_ value: Double) {
    precondition((0...100).contains(value), "percentage \(value) is outside 0...100")
    self.value = value
  }

  /// The percentage as a fraction from 0 through 1.
  public var fraction: Double { value / 100 }

  /// The share of a byte count this percentage stands for, rounded down.
  /// - Parameter total: The byte count that is 100%.
  /// - Returns: `total * value / 100`, rounded down.
  public func of(_ total: Int64) -> Int64 {
    if value >= 100 { return total }
    return Int64(Double(total) * fraction)  // Converting truncates: rounds down for ≥ 0.
  }

  /// Orders percentages by value.
  public static func < (lhs: Percentage, rhs: Percentage) -> Bool {
    lhs.value < rhs.value
  }

  /// The percentage as text, e.g. `90%` or `12.5%`.
  public var description: String {
    value == Double(Int(value)) ? "\(Int(value))%" : "\(value)%"
  }

  /// Why a text is not a percentage.
  public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text is empty or only white space.
    case empty
    /// The text is not a decimal number with an optional `%` sign.
    case invalid(String)
    /// The number is above 100.
    case outOfRange(String)

    /// A message that says what was wrong and what to write instead.
    public var description: String {
      switch self {
      case .empty:
        return "empty percentage: write a number from 0 to 100, e.g. 90%"
      case .invalid(let text):
        return "'\(text)' is not a percentage: write a number from 0 to 100, e.g. 90% or 12.5%"
      case .outOfRange(let text):
        return "'\(text)' is outside 0% to 100%"
      }
    }
  }

  /// Parses a percentage such as `90%`, `12.5%` or `90` (the `%` sign is optional).
  /// - Parameter text: The text to parse; surrounding white space is ignored.
  /// - Returns: The percentage.
  /// - Throws: `Percentage.ParseError` saying what is wrong with the text.
  public static func parse(_ text: String) throws(ParseError) -> Percentage {
    let trimmed = TextScanner.trimmed(text)
    if trimmed.isEmpty { throw .empty }
    var scanner = TextScanner(trimmed)
    guard let number = scanner.decimal() else {
      throw scanner.decimalOverflowed ? .outOfRange(text) : .invalid(text)
    }
    scanner.skipSpaces()
    if scanner.peek == UInt8(ascii: "%") { scanner.position += 1 }
    guard scanner.isAtEnd else { throw .invalid(text) }
    let value = number.doubleValue
    guard value <= 100 else { throw .outOfRange(text) }
    return Percentage(value)
  }
}
