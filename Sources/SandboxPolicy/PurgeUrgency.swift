/// How eagerly a purgeable file should be purged, mirroring APFS's purgeable urgencies.
///
/// Set per file through an attribute whose value is `low`, `medium` or `high`; files
/// without it have urgency `none`. Within a domain, higher urgencies are purged first.
public enum PurgeUrgency: UInt8, CaseIterable, Comparable, Hashable, Sendable,
  CustomStringConvertible
{
  /// No urgency attribute: purged last within its domain.
  case none = 0
  /// `low`.
  case low = 1
  /// `medium`.
  case medium = 2
  /// `high`: purged first within its domain.
  case high = 3

  /// The urgencies in the order they are purged: `high`, `medium`, `low`, `none`.
  public static let purgeOrder: [PurgeUrgency] = [.high, .medium, .low, .none]

  /// Orders urgencies from `none` to `high`.
  public static func < (lhs: PurgeUrgency, rhs: PurgeUrgency) -> Bool {
    lhs.rawValue < rhs.rawValue
  }

  /// The attribute value text: `none`, `low`, `medium`, `high`.
  public var description: String {
    switch self {
    case .none: return "none"
    case .low: return "low"
    case .medium: return "medium"
    case .high: return "high"
    }
  }

  /// The attribute value bytes that `parse(attributeValue:)` accepts for this urgency, or
  /// nil for `none` (which is the absence of the attribute).
  public var attributeValue: [UInt8]? {
    self == .none ? nil : Array(description.utf8)
  }

  /// Why an attribute value is not an urgency.
  public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The value is not `low`, `medium` or `high`; carries the offending bytes.
    case invalid([UInt8])

    /// A message that says what was wrong and what to write instead.
    public var description: String {
      switch self {
      case .invalid(let bytes):
        let shown = String(decoding: bytes.prefix(64), as: UTF8.self)
        return "'\(shown)' is not a purge urgency: use low, medium or high "
          + "(remove the attribute for none)"
      }
    }
  }

  /// Parses an attribute value: exactly `low`, `medium` or `high` (lowercase), optionally
  /// followed by any run of NUL, `\n` and `\r` bytes (as C strings, `echo` and editors
  /// leave them).
  /// - Parameter attributeValue: The value's bytes.
  /// - Returns: The urgency.
  /// - Throws: `PurgeUrgency.ParseError.invalid` for any other value, including `none` and
  ///   the empty value.
  public static func parse<C: Collection>(attributeValue: C) throws(ParseError) -> PurgeUrgency
  where C.Element == UInt8 {
    var bytes = Array(attributeValue)
    while let last = bytes.last, last == 0 || last == 0x0A || last == 0x0D {
      bytes.removeLast()
    }
    switch bytes {
    case Array("low".utf8): return .low
    case Array("medium".utf8): return .medium
    case Array("high".utf8): return .high
    default: throw .invalid(Array(attributeValue))
    }
  }
}
