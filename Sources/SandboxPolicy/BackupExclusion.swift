/// Apple's backup-exclusion attribute: its names and the value Apple writes.
public enum BackupExclusion {
  /// The modern attribute (`URLResourceValues.isExcludedFromBackup` on Apple systems).
  public static let attributeName = "com.apple.metadata:com_apple_backup_excludeItem"
  /// The legacy attribute (iOS 5.0.1; one byte `0x01`).
  public static let legacyAttributeName = "com.apple.MobileBackup"
  /// The string Apple stores in ``attributeName``.
  public static let appleValueString = "com.apple.backupd"
  /// What Apple writes into ``attributeName``: the 61-byte binary property list holding
  /// the string `com.apple.backupd`, as `xattr -px` shows it on a device (AppBoxBackup's
  /// property-list codec encodes exactly these bytes, and its tests say so).
  public static let appleValue: [UInt8] =
    Array("bplist00".utf8) + [0x5F, 0x10, 0x11] + Array(appleValueString.utf8)
    + [0x08, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1C]
}
