/// A property-list value, UIDs included, and AppBox's one property-list codec: Apple's
/// binary format (`bplist00`) and its XML format, both ways.
///
/// Foundation on Linux reads and writes plists but cannot make a `CF$UID`, which an
/// `NSKeyedArchiver` archive (an iOS backup's file record) is built of; so every plist of
/// a backup (the records, their attribute tables, `Manifest.plist`, `Info.plist`,
/// `Status.plist`) and Apple's exclusion value go through this type. Dictionaries keep
/// their order. Decoding checks every offset, size and nesting level: no input can make
/// it trap or loop.
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

// MARK: - Encoding and decoding

/// Why bytes are not a property list the codec accepts.
public enum PropertyListError: Error, Equatable, Sendable, CustomStringConvertible {
  /// Neither a binary plist (`bplist00`, room for its trailer) nor an XML one.
  case notPropertyList
  /// An offset, size, reference, element or value is wrong.
  case malformed(String)
  /// Nested deeper, or more objects decoded, than a real plist needs (a reference cycle
  /// or an expansion bomb).
  case tooComplex

  public var description: String {
    switch self {
    case .notPropertyList: "not a property list"
    case .malformed(let why): "malformed property list: \(why)"
    case .tooComplex: "property list nested too deeply or too large"
    }
  }
}

extension PropertyList {
  /// Apple's reference date, 2001-01-01 00:00 UTC, in Unix seconds: what ``date(_:)``
  /// counts from.
  public static let referenceDate: Int64 = XMLFormat.referenceDate

  /// The formats Apple writes.
  public enum Format: Sendable, Equatable {
    /// `bplist00`: an archive's only format, and what devices write for most plists.
    case binary
    /// XML 1.0 with Apple's DTD (`Info.plist` of a backup).
    case xml
  }

  /// The plist in `format`.
  public func encoded(as format: Format) -> [UInt8] {
    switch format {
    case .binary: BinaryFormat.encode(self)
    case .xml: XMLFormat.encode(self)
    }
  }

  /// The format `bytes` are in, judged by their start, or nil.
  public static func format(of bytes: some Collection<UInt8>) -> Format? {
    if BinaryFormat.matches(bytes) { return .binary }
    if XMLFormat.matches(bytes) { return .xml }
    return nil
  }

  /// Decodes a plist in either format.
  /// - Throws: ``PropertyListError``; nothing in the input can make it trap.
  public init(decoding bytes: [UInt8]) throws(PropertyListError) {
    switch Self.format(of: bytes) {
    case .binary: self = try BinaryFormat.decode(bytes)
    case .xml: self = try XMLFormat.decode(bytes)
    case nil: throw .notPropertyList
    }
  }

  /// The boolean, if this is one.
  public var booleanValue: Bool? {
    if case .boolean(let value) = self { return value }
    return nil
  }
}
