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

extension BinaryPropertyList {
  /// Encodes a property list whose only object is `string`, ASCII as Apple's writer
  /// stores it (other characters are replaced by `?`): for Apple's exclusion value.
  /// - Parameter string: ASCII text.
  /// - Returns: the encoded bytes (61 for `com.apple.backupd`, as a device writes).
  public static func encode(asciiString string: String) -> [UInt8] {
    let ascii = String(string.unicodeScalars.map { $0.isASCII ? Character($0) : "?" })
    return encode(.string(ascii))
  }

  /// Decodes a property list whose top object is a string.
  /// - Returns: the string, or nil when `bytes` is not such a property list.
  public static func decodeASCIIString(_ bytes: [UInt8]) -> String? {
    guard let value = try? decode(bytes) else { return nil }  // not a plist: no value, as documented
    return value.stringValue
  }
}
