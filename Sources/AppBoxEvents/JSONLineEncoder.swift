import SandboxPolicy

/// Encodes an event as one JSON object, its members in the order the event encodes them
/// and without a newline: a `Codable` `Encoder` over a byte buffer, in pure Swift (the
/// daemon encodes on its event queue, never with Foundation).
///
/// Only flat objects of strings, booleans, integers and finite `Double`s are written:
/// what an event line holds. Strings are escaped as ``JSONText/quoted(_:)`` escapes them
/// and `Double`s written as ``JSONText/number(_:)`` writes finite ones, so the text is the
/// same as the hand-written lines of earlier versions.
public enum JSONLineEncoder {
  /// The JSON text of `value`.
  /// - Throws: ``EventEncodingError`` for what a line cannot hold (a nested value, a
  ///   non-finite number).
  public static func encode(_ value: some Encodable) throws(EventEncodingError) -> [UInt8] {
    let writer = JSONLineWriter()
    do { try value.encode(to: LineEncoder(writer: writer)) } catch let error as EventEncodingError {
      throw error
    } catch {
      throw EventEncodingError(description: "\(error)")
    }
    return writer.finish()
  }
}

/// Why an event could not be encoded.
public struct EventEncodingError: Error, Sendable, Hashable, CustomStringConvertible {
  /// What went wrong.
  public var description: String
}

/// The bytes of one object being written (one per line; used by one thread).
final class JSONLineWriter {
  private(set) var bytes: [UInt8] = [UInt8(ascii: "{")]
  private var members = 0

  init() { bytes.reserveCapacity(192) }

  /// Starts a member: the separator and the quoted key with its colon. Keys are the
  /// events' own coding keys: ASCII letters, nothing to escape.
  func key(_ name: String) {
    if members > 0 { bytes.append(UInt8(ascii: ",")) }
    members += 1
    bytes.append(UInt8(ascii: "\""))
    bytes.append(contentsOf: name.utf8)
    bytes.append(UInt8(ascii: "\""))
    bytes.append(UInt8(ascii: ":"))
  }

  /// An integer's decimal digits, written in place.
  func integer(_ value: Int64) {
    if value < 0 { bytes.append(UInt8(ascii: "-")) }
    integer(magnitude: value.magnitude)
  }

  /// A non-negative integer's decimal digits, written in place.
  func integer(magnitude value: UInt64) {
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // up to 20 digits
    var count = 0
    var rest = value
    withUnsafeMutableBytes(of: &digits) { buffer in
      repeat {
        buffer[count] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
        rest /= 10
        count += 1
      } while rest > 0
      for index in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[index]) }
    }
  }

  /// A JSON string, escaped as ``JSONText/quoted(_:)`` escapes it: `"` and `\` with a
  /// backslash, U+0000–U+001F and U+007F as `\u00XX`, U+2028/U+2029 as `\u2028`/`\u2029`.
  func string(_ text: String) {
    let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
    bytes.append(quote)
    var text = text
    text.withUTF8 { utf8 in
      var index = 0
      while index < utf8.count {
        let byte = utf8[index]
        switch byte {
        case quote, backslash: bytes += [backslash, byte]
        case 0x00..<0x20, 0x7F:
          bytes += Array("\\u00".utf8) + [Self.hexDigits[Int(byte >> 4)], Self.hexDigits[Int(byte & 0x0F)]]
        case 0xE2 where index + 2 < utf8.count && utf8[index + 1] == 0x80 && (utf8[index + 2] | 1) == 0xA9:
          bytes += Array("\\u202".utf8) + [utf8[index + 2] == 0xA8 ? UInt8(ascii: "8") : UInt8(ascii: "9")]
          index += 2
        default: bytes.append(byte)
        }
        index += 1
      }
    }
    bytes.append(quote)
  }

  private static let hexDigits = Array("0123456789abcdef".utf8)

  /// A number's text.
  func raw(_ text: String) { bytes += text.utf8 }

  /// The object, closed.
  func finish() -> [UInt8] {
    bytes.append(UInt8(ascii: "}"))
    return bytes
  }
}

/// The `Encoder` an event's `encode(to:)` writes to: one keyed container, flat.
struct LineEncoder: Encoder {
  let writer: JSONLineWriter
  var codingPath: [any CodingKey] { [] }
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
    KeyedEncodingContainer(KeyedLineContainer<Key>(writer: writer))
  }

  func unkeyedContainer() -> any UnkeyedEncodingContainer { NoNestedValues() }
  func singleValueContainer() -> any SingleValueEncodingContainer { NoNestedValues() }
}

/// The members of the one object.
struct KeyedLineContainer<Key: CodingKey>: FlatKeyedContainer {
  let writer: JSONLineWriter
  var codingPath: [any CodingKey] { [] }

  mutating func encodeNil(forKey key: Key) throws {
    writer.key(key.stringValue)
    writer.raw("null")
  }
  mutating func encode(_ value: Bool, forKey key: Key) throws {
    writer.key(key.stringValue)
    writer.raw(value ? "true" : "false")
  }
  mutating func encode(_ value: String, forKey key: Key) throws {
    writer.key(key.stringValue)
    writer.string(value)
  }
  mutating func encode(_ value: Double, forKey key: Key) throws {
    guard value.isFinite else {
      throw EventEncodingError(description: "\(key.stringValue): \(value) is not a JSON number")
    }
    writer.key(key.stringValue)
    writer.raw(JSONText.number(value))
  }
  mutating func encode(_ value: Float, forKey key: Key) throws { try encode(Double(value), forKey: key) }
  mutating func encode(_ value: Int, forKey key: Key) throws { signed(Int64(value), key) }
  mutating func encode(_ value: Int8, forKey key: Key) throws { signed(Int64(value), key) }
  mutating func encode(_ value: Int16, forKey key: Key) throws { signed(Int64(value), key) }
  mutating func encode(_ value: Int32, forKey key: Key) throws { signed(Int64(value), key) }
  mutating func encode(_ value: Int64, forKey key: Key) throws { signed(value, key) }
  mutating func encode(_ value: UInt, forKey key: Key) throws { unsigned(UInt64(value), key) }
  mutating func encode(_ value: UInt8, forKey key: Key) throws { unsigned(UInt64(value), key) }
  mutating func encode(_ value: UInt16, forKey key: Key) throws { unsigned(UInt64(value), key) }
  mutating func encode(_ value: UInt32, forKey key: Key) throws { unsigned(UInt64(value), key) }
  mutating func encode(_ value: UInt64, forKey key: Key) throws { unsigned(value, key) }
  mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
    throw EventEncodingError(description: "\(key.stringValue): a \(T.self) is not a flat JSON value")
  }

  private func signed(_ value: Int64, _ key: Key) {
    writer.key(key.stringValue)
    writer.integer(value)
  }

  private func unsigned(_ value: UInt64, _ key: Key) {
    writer.key(key.stringValue)
    writer.integer(magnitude: value)
  }
}

/// What an event line cannot hold (arrays, nested objects): every write throws.
struct NoNestedValues: UnkeyedEncodingContainer, SingleValueEncodingContainer {
  var codingPath: [any CodingKey] { [] }
  var count: Int { 0 }
  static let error = EventEncodingError(description: "an event line holds only flat members")
  mutating func encodeNil() throws { throw Self.error }
  mutating func encode<T: Encodable>(_ value: T) throws { throw Self.error }
  mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
    -> KeyedEncodingContainer<NestedKey>
  {
    KeyedEncodingContainer(NoNestedObject<NestedKey>())
  }
  mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
  mutating func superEncoder() -> any Encoder { NoNestedEncoder() }
}

/// A nested object, refused.
struct NoNestedObject<Key: CodingKey>: FlatKeyedContainer {
  var codingPath: [any CodingKey] { [] }
  mutating func encodeNil(forKey key: Key) throws { throw NoNestedValues.error }
  mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw NoNestedValues.error }
}

/// A keyed container of a flat line: what it would nest in it is refused (every write to
/// the nested container or encoder throws).
protocol FlatKeyedContainer: KeyedEncodingContainerProtocol {}

extension FlatKeyedContainer {
  mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
    -> KeyedEncodingContainer<NestedKey>
  {
    KeyedEncodingContainer(NoNestedObject<NestedKey>())
  }
  mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { NoNestedValues() }
  mutating func superEncoder() -> any Encoder { NoNestedEncoder() }
  mutating func superEncoder(forKey key: Key) -> any Encoder { NoNestedEncoder() }
}

/// An encoder for a nested value, refused.
struct NoNestedEncoder: Encoder {
  var codingPath: [any CodingKey] { [] }
  var userInfo: [CodingUserInfoKey: Any] { [:] }
  func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
    KeyedEncodingContainer(NoNestedObject<Key>())
  }
  func unkeyedContainer() -> any UnkeyedEncodingContainer { NoNestedValues() }
  func singleValueContainer() -> any SingleValueEncodingContainer { NoNestedValues() }
}
