/// A decimal number read by `TextScanner`: `integer.fraction`, with the fraction scaled by
/// `fractionScale` (10 to the number of fraction digits kept).
struct ScannedNumber: Equatable {
  /// The digits before the point.
  var integer: Int64
  /// The digits after the point, as an integer (at most 18 digits are kept; further digits
  /// are dropped, which rounds down).
  var fraction: Int64
  /// The number of fraction digits kept in `fraction`.
  var fractionDigits: Int
  /// 10 to the power `fractionDigits`.
  var fractionScale: Int64

  /// The number as a `Double`.
  var doubleValue: Double {
    Double(integer) + Double(fraction) / Double(fractionScale)
  }
}

/// A small ASCII scanner over UTF-8 bytes, shared by the option parsers.
struct TextScanner {
  /// The bytes being scanned.
  let bytes: [UInt8]
  /// The index of the next unread byte.
  var position: Int = 0
  /// Whether the last `decimal()` call failed because the integer part was too large.
  var decimalOverflowed = false

  /// Creates a scanner over the UTF-8 bytes of a text.
  init(_ text: String) {
    self.bytes = Array(text.utf8)
  }

  /// The text without leading and trailing ASCII white space.
  static func trimmed(_ text: String) -> String {
    let bytes = Array(text.utf8)
    guard let first = bytes.firstIndex(where: { !isSpace($0) }),
      let last = bytes.lastIndex(where: { !isSpace($0) })
    else { return "" }
    return String(decoding: bytes[first...last], as: UTF8.self)
  }

  /// Whether a byte is ASCII white space.
  static func isSpace(_ byte: UInt8) -> Bool {
    byte == 0x20 || (0x09...0x0D).contains(byte)
  }

  /// Whether every byte has been read.
  var isAtEnd: Bool { position >= bytes.count }

  /// The unread bytes.
  var rest: ArraySlice<UInt8> { bytes[min(position, bytes.count)...] }

  /// The next byte, if any, without reading it.
  var peek: UInt8? { isAtEnd ? nil : bytes[position] }

  /// Skips ASCII white space.
  mutating func skipSpaces() {
    while let byte = peek, Self.isSpace(byte) { position += 1 }
  }

  /// Reads `digits[.digits]`; returns nil (reading nothing) if there is no such number or
  /// the integer part does not fit in an `Int64`.
  mutating func decimal() -> ScannedNumber? {
    let start = position
    decimalOverflowed = false
    var integer: Int64 = 0
    var digits = 0
    while let byte = peek, (0x30...0x39).contains(byte) {
      let (times10, o1) = integer.multipliedReportingOverflow(by: 10)
      let (sum, o2) = times10.addingReportingOverflow(Int64(byte - 0x30))
      if o1 || o2 {
        position = start
        decimalOverflowed = true
        return nil
      }
      integer = sum
      digits += 1
      position += 1
    }
    guard digits > 0 else {
      position = start
      return nil
    }
    var number = ScannedNumber(integer: integer, fraction: 0, fractionDigits: 0, fractionScale: 1)
    guard peek == UInt8(ascii: ".") else { return number }
    position += 1
    var fractionDigits = 0
    while let byte = peek, (0x30...0x39).contains(byte) {
      if number.fractionDigits < 18 {
        number.fraction = number.fraction * 10 + Int64(byte - 0x30)
        number.fractionDigits += 1
        number.fractionScale *= 10
      }
      fractionDigits += 1
      position += 1
    }
    guard fractionDigits > 0 else {
      position = start
      return nil
    }
    return number
  }

  /// Reads a run of ASCII letters and returns them lowercased.
  mutating func letters() -> String {
    var result: [UInt8] = []
    while let byte = peek,
      (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    {
      result.append(byte | 0x20)
      position += 1
    }
    return String(decoding: result, as: UTF8.self)
  }
}
