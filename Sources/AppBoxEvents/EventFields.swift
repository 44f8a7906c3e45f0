import SandboxPolicy

// MARK: - Members shared by several event types

extension KeyedEncodingContainer {
  /// Writes seconds (a time or a duration), clamped into ``EventSeconds``' range.
  mutating func encodeSeconds(_ value: Double, forKey key: Key) throws {
    try encode(EventSeconds.clamped(value), forKey: key)
  }

  /// Writes a path: `path` is the display form (each ill-formed UTF-8 subsequence becomes
  /// U+FFFD) and, when the bytes are not UTF-8, `pathHex` follows with the exact bytes in
  /// lowercase hex, so the log stays lossless.
  mutating func encodePath(_ bytes: [UInt8], forKey path: Key, hexKey: Key) throws {
    try encode(String(decoding: bytes, as: UTF8.self), forKey: path)
    if !JSONText.isValidUTF8(bytes) { try encode(JSONText.hex(bytes), forKey: hexKey) }
  }
}

extension KeyedDecodingContainer {
  /// Reads seconds, refused outside ``EventSeconds``' range.
  func decodeSeconds(forKey key: Key) throws -> Double {
    let value = try decode(Double.self, forKey: key)
    guard EventSeconds.isValid(value) else {
      throw DecodingError.dataCorrupted(
        .init(codingPath: [key], debugDescription: "\(value) s is beyond ±\(EventSeconds.limit) s"))
    }
    return value
  }

  /// Reads a path's exact bytes: `pathHex` when present, else `path` as UTF-8.
  func decodePath(forKey path: Key, hexKey: Key) throws -> [UInt8] {
    guard let hex = try decodeIfPresent(String.self, forKey: hexKey) else {
      return Array(try decode(String.self, forKey: path).utf8)
    }
    let digits = Array(hex.utf8)
    var bytes: [UInt8] = []
    bytes.reserveCapacity(digits.count / 2)
    var index = 0
    while index + 1 < digits.count {
      guard let high = Self.hexValue(digits[index]), let low = Self.hexValue(digits[index + 1]) else { break }
      bytes.append(high << 4 | low)
      index += 2
    }
    guard index == digits.count else {
      throw DecodingError.dataCorrupted(.init(codingPath: [hexKey], debugDescription: "not lowercase hex bytes"))
    }
    return bytes
  }

  /// A name from a closed set (a state, a class, a reason), refused when unknown.
  func decodeName<T>(_ key: Key, _ what: String, _ parse: (String) -> T?) throws -> T {
    let name = try decode(String.self, forKey: key)
    guard let value = parse(name) else {
      throw DecodingError.dataCorrupted(.init(codingPath: [key], debugDescription: "unknown \(what) \(name)"))
    }
    return value
  }

  private static func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    default: nil
    }
  }
}

extension ProtectionClass {
  /// The class with `name` exactly as events write it (``name``).
  static func named(_ name: String) -> ProtectionClass? { allCases.first { $0.name == name } }
}

extension ProtectedOperation {
  /// The operation with `name` exactly as events write it.
  static func named(_ name: String) -> ProtectedOperation? { allCases.first { $0.name == name } }
}
