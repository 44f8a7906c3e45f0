/// A property-list value, as Apple's binary plists (`bplist00`) hold them, UIDs included.
///
/// Foundation on Linux reads and writes plists but cannot make a `CF$UID`, which an
/// `NSKeyedArchiver` archive (an iOS backup's file record) is built of; so AppBox writes
/// and reads those archives with ``BinaryPropertyList``. Dictionaries keep their order.
public indirect enum PropertyList: Sendable, Equatable {
  /// A string.
  case string(String)
  /// A signed integer.
  case integer(Int64)
  /// A double.
  case real(Double)
  /// A boolean.
  case boolean(Bool)
  /// A date, in seconds since 2001-01-01 00:00 UTC (Apple's reference date).
  case date(Double)
  /// Bytes.
  case data([UInt8])
  /// An archive's reference to the object at this index of `$objects`.
  case uid(UInt64)
  /// An array.
  case array([PropertyList])
  /// A dictionary with string keys, in order.
  case dictionary([(String, PropertyList)])

  /// The value for `key`, when this is a dictionary that has it.
  public subscript(key: String) -> PropertyList? {
    guard case .dictionary(let pairs) = self else { return nil }
    return pairs.first { $0.0 == key }?.1
  }

  /// The string, if this is one.
  public var stringValue: String? {
    if case .string(let value) = self { return value }
    return nil
  }

  /// The integer, if this is one.
  public var integerValue: Int64? {
    if case .integer(let value) = self { return value }
    return nil
  }

  /// The bytes, if this is data.
  public var dataValue: [UInt8]? {
    if case .data(let value) = self { return value }
    return nil
  }

  /// The UID, if this is one.
  public var uidValue: UInt64? {
    if case .uid(let value) = self { return value }
    return nil
  }

  /// The elements, if this is an array.
  public var arrayValue: [PropertyList]? {
    if case .array(let value) = self { return value }
    return nil
  }

  public static func == (lhs: PropertyList, rhs: PropertyList) -> Bool {
    switch (lhs, rhs) {
    case (.string(let a), .string(let b)): a == b
    case (.integer(let a), .integer(let b)): a == b
    case (.real(let a), .real(let b)): a == b
    case (.boolean(let a), .boolean(let b)): a == b
    case (.date(let a), .date(let b)): a == b
    case (.data(let a), .data(let b)): a == b
    case (.uid(let a), .uid(let b)): a == b
    case (.array(let a), .array(let b)): a == b
    case (.dictionary(let a), .dictionary(let b)):
      a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    default: false
    }
  }
}
