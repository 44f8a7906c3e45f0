/// Decodes an event from one JSON line: a `Codable` `Decoder` over the line's top-level
/// members (``JSONObjectScanner``), in pure Swift. Integers are read exactly from their
/// text (`9223372036854775807` is `Int64.max`, `1e300` is no integer); `Double`s must be
/// finite (`1e400` is refused). Members the type does not ask for are ignored.
public enum JSONLineDecoder {
  /// Decodes a `T` from `line`.
  /// - Throws: ``EventLineError`` for text that is not one JSON object, or an object that
  ///   is not a `T`.
  public static func decode<T: Decodable>(_ type: T.Type, from line: some Collection<UInt8>) throws(EventLineError)
    -> T
  {
    let members = try JSONObjectScanner.members(line)
    return try decode(type, members: members)
  }

  static func decode<T: Decodable>(_ type: T.Type, members: [String: JSONMember]) throws(EventLineError) -> T {
    do { return try T(from: LineDecoder(members: members)) } catch let error as EventLineError {
      throw error
    } catch let DecodingError.keyNotFound(key, _) {
      throw .badField(key.stringValue, "missing")
    } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context),
      let DecodingError.dataCorrupted(context)
    {
      throw .badField(context.codingPath.last?.stringValue ?? "?", context.debugDescription)
    } catch {
      throw .badField("?", "\(error)")
    }
  }
}

/// Why a line is not an event this version reads.
public enum EventLineError: Error, Sendable, Hashable, CustomStringConvertible {
  /// Not one JSON object.
  case notJSON(String)
  /// A JSON object of a type this version does not know (skipped and counted by readers).
  case unknownType(String)
  /// A known type with a member missing, of the wrong kind, or out of range.
  case badField(String, String)

  public var description: String {
    switch self {
    case .notJSON(let reason): "not a JSON object: \(reason)"
    case .unknownType(let type): "unknown event type \(type)"
    case .badField(let key, let reason): "\(key): \(reason)"
    }
  }
}

/// The `Decoder` an event's `init(from:)` reads: one keyed container over the members.
struct LineDecoder: Decoder {
  let members: [String: JSONMember]
  var codingPath: [any CodingKey] { [] }
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
    KeyedDecodingContainer(KeyedLineDecodingContainer<Key>(members: members))
  }

  func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
    throw DecodingError.typeMismatch(
      [Any].self, .init(codingPath: [], debugDescription: "an event line is an object"))
  }

  func singleValueContainer() throws -> any SingleValueDecodingContainer {
    throw DecodingError.typeMismatch(Any.self, .init(codingPath: [], debugDescription: "an event line is an object"))
  }
}

/// The members of the line, read by key.
struct KeyedLineDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
  let members: [String: JSONMember]
  var codingPath: [any CodingKey] { [] }
  var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }

  func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

  func decodeNil(forKey key: Key) throws -> Bool {
    try member(key) == .null
  }

  func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
    guard case .bool(let value) = try member(key) else { throw mismatch(type, key, "a boolean") }
    return value
  }

  func decode(_ type: String.Type, forKey key: Key) throws -> String {
    guard case .string(let value) = try member(key) else { throw mismatch(type, key, "a string") }
    return value
  }

  func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
    guard case .number(let text) = try member(key) else { throw mismatch(type, key, "a number") }
    // The text passed JSON's number grammar, which Double's parser accepts whole.
    guard let value = Double(String(decoding: text, as: UTF8.self)), value.isFinite else {
      throw DecodingError.dataCorrupted(
        .init(codingPath: [key], debugDescription: "\(String(decoding: text, as: UTF8.self)) is out of range"))
    }
    return value
  }

  func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
    let value = Float(try decode(Double.self, forKey: key))
    guard value.isFinite else {
      throw DecodingError.dataCorrupted(.init(codingPath: [key], debugDescription: "out of range for a Float"))
    }
    return value
  }

  func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(key) }
  func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(key) }
  func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(key) }
  func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(key) }
  func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(key) }
  func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(key) }
  func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(key) }
  func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(key) }
  func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(key) }
  func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(key) }

  func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
    throw mismatch(type, key, "a flat value")
  }

  func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
    -> KeyedDecodingContainer<NestedKey>
  {
    throw mismatch([String: Any].self, key, "no nested object")
  }

  func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
    throw mismatch([Any].self, key, "no array")
  }

  func superDecoder() throws -> any Decoder { LineDecoder(members: members) }
  func superDecoder(forKey key: Key) throws -> any Decoder { LineDecoder(members: members) }

  private func member(_ key: Key) throws -> JSONMember {
    guard let value = members[key.stringValue] else {
      throw DecodingError.keyNotFound(key, .init(codingPath: [], debugDescription: "missing"))
    }
    return value
  }

  private func mismatch(_ type: Any.Type, _ key: Key, _ expected: String) -> DecodingError {
    .typeMismatch(type, .init(codingPath: [key], debugDescription: "expected \(expected)"))
  }

  /// An integer read exactly from its text: digits only (no fraction or exponent), in
  /// the type's range.
  private func integer<T: FixedWidthInteger>(_ key: Key) throws -> T {
    guard case .number(let text) = try member(key) else { throw mismatch(T.self, key, "an integer") }
    var magnitude: UInt64 = 0
    let negative = text.first == UInt8(ascii: "-")
    for byte in text.dropFirst(negative ? 1 : 0) {
      guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else {
        throw DecodingError.dataCorrupted(
          .init(codingPath: [key], debugDescription: "\(String(decoding: text, as: UTF8.self)) is not an integer"))
      }
      let (times, overflowTimes) = magnitude.multipliedReportingOverflow(by: 10)
      let (sum, overflowSum) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
      guard !overflowTimes, !overflowSum else { throw outOfRange(T.self, key, text) }
      magnitude = sum
    }
    if negative {
      guard T.isSigned, magnitude <= UInt64(Int64.max) + 1 else {
        if magnitude == 0 { return 0 }
        throw outOfRange(T.self, key, text)
      }
      let value = magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
      guard let exact = T(exactly: value) else { throw outOfRange(T.self, key, text) }
      return exact
    }
    guard let exact = T(exactly: magnitude) else { throw outOfRange(T.self, key, text) }
    return exact
  }

  private func outOfRange(_ type: Any.Type, _ key: Key, _ text: [UInt8]) -> DecodingError {
    .dataCorrupted(
      .init(codingPath: [key], debugDescription: "\(String(decoding: text, as: UTF8.self)) is out of range for \(type)")
    )
  }
}
