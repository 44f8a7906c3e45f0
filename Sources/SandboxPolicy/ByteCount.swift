/// A number of bytes, as given in options such as `--capacity 2G`.
///
/// All unit suffixes are binary multiples: `1K` = 1024, `1M` = 1024², `1G` = 1024³,
/// `1T` = 1024⁴, `1P` = 1024⁵. `K`, `KB` and `KiB` (any letter case) mean the same thing, so
/// `2GB` and `2GiB` are both 2 147 483 648 bytes. A fractional count (`1.5G`) is allowed
/// with a unit and is rounded down to whole bytes.
public struct ByteCount: Hashable, Comparable, Sendable, CustomStringConvertible {
  /// The number of bytes.
  public var bytes: Int64

  /// Creates a byte count.
  /// - Parameter bytes: The number of bytes.
  public init(_ bytes: Int64) {
    self.bytes = bytes
  }

  /// Orders byte counts by their number of bytes.
  public static func < (lhs: ByteCount, rhs: ByteCount) -> Bool {
    lhs.bytes < rhs.bytes
  }

  /// The count for humans, as `formatted` does.
  public var description: String { formatted }

  // MARK: - Parsing

  /// Why a text is not a byte count.
  public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text is empty or only white space.
    case empty
    /// The text does not start with a decimal number (digits, optionally `.` and more digits).
    case invalidNumber(String)
    /// The suffix after the number is not one of the accepted units.
    case unknownUnit(text: String, unit: String)
    /// A fraction was given without a unit, which would be a fraction of a byte.
    case fractionalBytes(String)
    /// The value does not fit in a signed 64-bit number of bytes.
    case overflow(String)

    /// A message that says what was wrong and what to write instead.
    public var description: String {
      let hint =
        "write a whole number of bytes or a number with a unit K, M, G, T or P "
        + "(binary: 1K = 1024; B and iB suffixes are optional), e.g. 4096, 500M, 1.5G, 2GiB"
      switch self {
      case .empty:
        return "empty byte count: \(hint)"
      case .invalidNumber(let text):
        return "'\(text)' is not a byte count: \(hint)"
      case .unknownUnit(let text, let unit):
        return "'\(text)' is not a byte count: unknown unit '\(unit)'; \(hint)"
      case .fractionalBytes(let text):
        return "'\(text)' is a fraction of a byte: give a unit (e.g. 1.5K) or a whole number"
      case .overflow(let text):
        return "'\(text)' is too large: byte counts must be below 8 EiB"
      }
    }
  }

  /// Parses a byte count such as `4096`, `10K`, `500M`, `1.5G`, `2GiB`, `2GB` or `1T`.
  ///
  /// Leading and trailing white space and white space between the number and the unit are
  /// ignored. Units are case-insensitive binary multiples (see the type's documentation);
  /// fractions with a unit are rounded down to whole bytes.
  /// - Parameter text: The text to parse.
  /// - Returns: The byte count.
  /// - Throws: `ByteCount.ParseError` saying what is wrong with the text.
  public static func parse(_ text: String) throws(ParseError) -> ByteCount {
    let trimmed = TextScanner.trimmed(text)
    if trimmed.isEmpty { throw .empty }
    var scanner = TextScanner(trimmed)
    guard let number = scanner.decimal() else {
      throw scanner.decimalOverflowed ? .overflow(text) : .invalidNumber(text)
    }
    scanner.skipSpaces()
    let unit = String(decoding: scanner.rest, as: UTF8.self)
    guard let exponent = unitExponent(unit) else {
      throw .unknownUnit(text: text, unit: unit)
    }
    if exponent == 0 && number.fractionDigits > 0 { throw .fractionalBytes(text) }
    let multiplier = Int64(1) << (10 * exponent)
    let (whole, wholeOverflow) = number.integer.multipliedReportingOverflow(by: multiplier)
    if wholeOverflow { throw .overflow(text) }
    // fraction / 10^digits * multiplier, exactly, rounded down.
    let product = number.fraction.multipliedFullWidth(by: multiplier)
    let (part, _) = number.fractionScale.dividingFullWidth(product)
    let (total, totalOverflow) = whole.addingReportingOverflow(part)
    if totalOverflow { throw .overflow(text) }
    return ByteCount(total)
  }

  /// The power of 1024 a unit suffix stands for, or nil if it is not a unit.
  private static func unitExponent(_ unit: String) -> Int? {
    var letters = Array(unit.lowercased().utf8)
    if letters.last == UInt8(ascii: "b") { letters.removeLast() }
    let prefixes: [UInt8] = [
      UInt8(ascii: "k"), UInt8(ascii: "m"), UInt8(ascii: "g"),
      UInt8(ascii: "t"), UInt8(ascii: "p"),
    ]
    switch letters.count {
    case 0:
      return 0
    case 1:
      return prefixes.firstIndex(of: letters[0]).map { $0 + 1 }
    case 2 where letters[1] == UInt8(ascii: "i"):
      // "KiB" without its B is "Ki"; a bare "Ki" is accepted as well.
      return prefixes.firstIndex(of: letters[0]).map { $0 + 1 }
    default:
      return nil
    }
  }

  // MARK: - Formatting

  /// The count for humans with a binary unit and at most one decimal, e.g. `512 B`,
  /// `10 KiB`, `1.5 GiB`.
  public var formatted: String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    let sign = bytes < 0 ? "-" : ""
    let magnitude = bytes.magnitude
    if magnitude < 1024 { return "\(sign)\(magnitude) B" }
    var exponent = 0
    while exponent < units.count - 1 && magnitude >> (10 * UInt64(exponent + 1)) > 0 {
      exponent += 1
    }
    // Tenths of the unit, rounded half up, in exact integer arithmetic.
    let unit = UInt64(1) << (10 * UInt64(exponent))
    let product = magnitude.multipliedFullWidth(by: 10)
    let sum = product.low.addingReportingOverflow(unit / 2)
    var tenths = unit.dividingFullWidth((product.high + (sum.overflow ? 1 : 0), sum.partialValue))
      .quotient
    if tenths >= 10240 && exponent < units.count - 1 {
      exponent += 1
      tenths = (tenths + 512) / 1024
    }
    let whole = Int(tenths) / 10
    let decimal = Int(tenths) % 10
    let number = decimal == 0 ? "\(whole)" : "\(whole).\(decimal)"
    return "\(sign)\(number) \(units[exponent])"
  }
}
