/// Hand-written JSON text fragments for event lines and status output, without Foundation.
public enum JSONText {
  /// A JSON string literal, with its quotes, for a Swift string.
  ///
  /// Escapes `"` and `\` with a backslash, every control character U+0000–U+001F and
  /// U+007F as `\u00XX` (lowercase hex), and U+2028/U+2029 as `\u2028`/`\u2029` so the
  /// line is also safe to embed in JavaScript. Everything else is copied as UTF-8.
  ///
  /// - Parameter text: the string to quote.
  public static func quoted(_ text: String) -> String {
    var out = "\""
    out.reserveCapacity(text.utf8.count + 2)
    for scalar in text.unicodeScalars {
      switch scalar.value {
      case 0x22: out += "\\\""
      case 0x5C: out += "\\\\"
      case 0x00..<0x20, 0x7F, 0x2028, 0x2029: out += unicodeEscape(scalar.value)
      default: out.unicodeScalars.append(scalar)
      }
    }
    out += "\""
    return out
  }

  /// A JSON string literal for bytes that should be UTF-8, such as a file name.
  ///
  /// Ill-formed UTF-8 is decoded deterministically: each maximal ill-formed subsequence
  /// becomes one U+FFFD (the Unicode-recommended replacement, as `String(decoding:as:)`
  /// does), so different byte strings can quote alike. Callers that must keep the exact
  /// bytes add them separately (see ``hex(_:)``).
  ///
  /// - Parameter bytes: the bytes to quote.
  public static func quoted(bytes: some Collection<UInt8>) -> String {
    quoted(String(decoding: bytes, as: UTF8.self))
  }

  /// A JSON number for a `Double`: Swift's shortest round-tripping form (e.g. `1.5`,
  /// `1700000000.25`, `1e-05`), or `null` for infinities and NaN, which JSON cannot hold.
  ///
  /// - Parameter value: the number to write.
  public static func number(_ value: Double) -> String {
    value.isFinite ? value.description : "null"
  }

  /// Lowercase hexadecimal digits of bytes, two per byte, without quotes.
  ///
  /// - Parameter bytes: the bytes to write.
  public static func hex(_ bytes: some Collection<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for byte in bytes {
      out.append(digits[Int(byte >> 4)])
      out.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// Whether bytes are well-formed UTF-8.
  ///
  /// - Parameter bytes: the bytes to check.
  public static func isValidUTF8(_ bytes: some Collection<UInt8>) -> Bool {
    var iterator = bytes.makeIterator()
    var decoder = UTF8()
    while true {
      switch decoder.decode(&iterator) {
      case .scalarValue: continue
      case .emptyInput: return true
      case .error: return false
      }
    }
  }

  /// `\uXXXX` for a BMP scalar value, lowercase hex.
  private static func unicodeEscape(_ value: UInt32) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = Array("\\u".utf8)
    for shift in stride(from: 12, through: 0, by: -4) {
      out.append(digits[Int((value >> UInt32(shift)) & 0xF)])
    }
    return String(decoding: out, as: UTF8.self)
  }
}
