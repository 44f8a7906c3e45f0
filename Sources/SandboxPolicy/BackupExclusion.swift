/// Apple's backup-exclusion attribute: its names and the value Apple writes.
public enum BackupExclusion {
  /// The modern attribute (`URLResourceValues.isExcludedFromBackup` on Apple systems).
  public static let attributeName = "com.apple.metadata:com_apple_backup_excludeItem"
  /// The legacy attribute (iOS 5.0.1; one byte `0x01`).
  public static let legacyAttributeName = "com.apple.MobileBackup"
  /// The string Apple stores in ``attributeName``.
  public static let appleValueString = "com.apple.backupd"
  /// What Apple writes into ``attributeName``: a 61-byte binary property list holding the
  /// string `com.apple.backupd`.
  public static let appleValue: [UInt8] = BinaryPropertyList.encode(asciiString: appleValueString)
}

/// The `bplist00` format, as far as AppBox writes it: a property list of one ASCII string.
public enum BinaryPropertyList {
  /// Encodes a property list whose only object is `string` (ASCII, as Apple's writer
  /// stores strings without non-ASCII characters).
  ///
  /// Layout: the `bplist00` magic; the object (marker `0x5n` with the length in the low
  /// nibble, or `0x5F` followed by an integer object when it is 15 or more); a one-entry
  /// offset table; the 32-byte trailer (6 unused bytes, offset size, reference size, object
  /// count, top object, offset-table offset, the last three as big-endian 64-bit integers).
  /// - Parameter string: ASCII text (other characters are replaced by `?`).
  /// - Returns: the encoded bytes.
  public static func encode(asciiString string: String) -> [UInt8] {
    let characters = string.unicodeScalars.map { $0.isASCII ? UInt8($0.value) : UInt8(ascii: "?") }
    var bytes = Array("bplist00".utf8)
    let objectOffset = bytes.count
    if characters.count < 15 {
      bytes.append(0x50 | UInt8(characters.count))
    } else {
      bytes.append(0x5F)
      bytes += integerObject(characters.count)
    }
    bytes += characters
    let tableOffset = bytes.count
    let offsetSize = byteWidth(objectOffset)
    bytes += bigEndian(UInt64(objectOffset), width: offsetSize)
    bytes += [0, 0, 0, 0, 0, 0, UInt8(offsetSize), 1]
    bytes += bigEndian(1, width: 8)  // objects
    bytes += bigEndian(0, width: 8)  // top object
    bytes += bigEndian(UInt64(tableOffset), width: 8)
    return bytes
  }

  /// Decodes a property list whose top object is an ASCII string (the form ``encode(asciiString:)``
  /// writes, with any offset and reference sizes).
  /// - Returns: the string, or nil when `bytes` is not such a property list.
  public static func decodeASCIIString(_ bytes: [UInt8]) -> String? {
    guard bytes.count >= 8 + 32, bytes.starts(with: Array("bplist00".utf8)) else { return nil }
    let trailer = bytes.count - 32
    let offsetSize = Int(bytes[trailer + 6])
    let topObject = readBigEndian(bytes, at: trailer + 16, width: 8)
    let tableOffset = readBigEndian(bytes, at: trailer + 24, width: 8)
    guard (1...8).contains(offsetSize), let topObject, let tableOffset,
      let entry = Int(exactly: tableOffset).map({ $0 + Int(topObject) * offsetSize }),
      let objectOffset = readBigEndian(bytes, at: entry, width: offsetSize).flatMap({ Int(exactly: $0) }),
      objectOffset >= 8, objectOffset < trailer
    else { return nil }
    let marker = bytes[objectOffset]
    guard marker & 0xF0 == 0x50 else { return nil }
    var start = objectOffset + 1
    var length = Int(marker & 0x0F)
    if length == 0x0F {
      guard start < trailer, bytes[start] & 0xF0 == 0x10 else { return nil }
      let width = 1 << Int(bytes[start] & 0x0F)
      guard width <= 8, let value = readBigEndian(bytes, at: start + 1, width: width), value < UInt64(trailer) else {
        return nil
      }
      length = Int(value)
      start += 1 + width
    }
    guard start + length <= trailer else { return nil }
    return String(decoding: bytes[start..<(start + length)], as: UTF8.self)
  }

  /// An integer object (`0x1n`, 2^n bytes, big-endian) for a length.
  static func integerObject(_ value: Int) -> [UInt8] {
    let width = byteWidth(value)
    let exponent: UInt8 = width == 1 ? 0 : width == 2 ? 1 : width <= 4 ? 2 : 3
    return [0x10 | exponent] + bigEndian(UInt64(value), width: 1 << Int(exponent))
  }

  /// The fewest bytes (1, 2, 4 or 8) that hold `value`.
  static func byteWidth(_ value: Int) -> Int {
    value <= 0xFF ? 1 : value <= 0xFFFF ? 2 : value <= 0xFFFF_FFFF ? 4 : 8
  }

  static func bigEndian(_ value: UInt64, width: Int) -> [UInt8] {
    (0..<width).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
  }

  static func readBigEndian(_ bytes: [UInt8], at offset: Int, width: Int) -> UInt64? {
    guard offset >= 0, width > 0, offset + width <= bytes.count else { return nil }
    return bytes[offset..<(offset + width)].reduce(0) { $0 << 8 | UInt64($1) }
  }
}
