import Foundation
import PlainFoundation
import SandboxPolicy

// MARK: - Keys Foundation on Linux lacks

extension URLResourceKey {
  /// Bytes available for essential data: free plus purgeable (on a mount,
  /// `user.appbox.available-important`; elsewhere the volume's free bytes).
  public static let volumeAvailableCapacityForImportantUsageKey = URLResourceKey(
    rawValue: "NSURLVolumeAvailableCapacityForImportantUsageKey")
  /// Bytes available for non-essential data (on a mount,
  /// `user.appbox.available-opportunistic`; elsewhere the volume's free bytes).
  public static let volumeAvailableCapacityForOpportunisticUsageKey = URLResourceKey(
    rawValue: "NSURLVolumeAvailableCapacityForOpportunisticUsageKey")
  /// The item's protection class (`URLFileProtection`).
  public static let fileProtectionKey = URLResourceKey(rawValue: "NSURLFileProtectionKey")

  /// The keys AppBoxKit answers itself.
  static let appBoxKeys: Set<URLResourceKey> = [
    .volumeAvailableCapacityForImportantUsageKey, .volumeAvailableCapacityForOpportunisticUsageKey,
    .fileProtectionKey,
  ]
}

extension URLResourceValues {
  /// See ``URLResourceKey/volumeAvailableCapacityForImportantUsageKey``.
  public var volumeAvailableCapacityForImportantUsage: Int64? {
    allValues[.volumeAvailableCapacityForImportantUsageKey] as? Int64
  }
  /// See ``URLResourceKey/volumeAvailableCapacityForOpportunisticUsageKey``.
  public var volumeAvailableCapacityForOpportunisticUsage: Int64? {
    allValues[.volumeAvailableCapacityForOpportunisticUsageKey] as? Int64
  }
  /// The item's protection class, on an AppBox mount (nil elsewhere, as Foundation on
  /// Linux has none).
  public var fileProtection: URLFileProtection? { allValues[.fileProtectionKey] as? URLFileProtection }
}

// MARK: - Reading and setting

extension URL {
  /// Foundation's `setResourceValues(_:)`; on an AppBox mount `isExcludedFromBackup`
  /// writes (true) or removes (false) Apple's attribute
  /// `com.apple.metadata:com_apple_backup_excludeItem`, with Apple's value.
  public mutating func setResourceValues(_ values: URLResourceValues) throws {
    if let excluded = values.allValues[.isExcludedFromBackupKey] as? Bool, isFileURL,
      AppBoxContainer.containing(path) != nil
    {
      try ItemAttributes.setExcluded(excluded, path)
    }
    try PlainFoundation.setResourceValues(values, of: &self)
  }

  /// Foundation's `resourceValues(forKeys:)`, with, on an AppBox mount,
  /// `isExcludedFromBackup` (the item or a directory above it excluded),
  /// `fileProtection`, and the important and opportunistic capacities; the capacities
  /// elsewhere are the volume's free bytes.
  public func resourceValues(forKeys keys: Set<URLResourceKey>) throws -> URLResourceValues {
    let asked = keys.intersection(URLResourceKey.appBoxKeys)
    var plainKeys = keys.subtracting(URLResourceKey.appBoxKeys)
    let container = isFileURL ? AppBoxContainer.containing(path) : nil
    let capacities =
      asked.contains(.volumeAvailableCapacityForImportantUsageKey)
      || asked.contains(.volumeAvailableCapacityForOpportunisticUsageKey)
    if capacities && container == nil { plainKeys.insert(.volumeAvailableCapacityKey) }
    var values = try PlainFoundation.resourceValues(forKeys: plainKeys, of: self)
    guard let container else {
      if capacities, let free = values.volumeAvailableCapacity {
        for key in asked where key != .fileProtectionKey { values.appBoxSet(key, Int64(free)) }
      }
      return values
    }
    if keys.contains(.isExcludedFromBackupKey) {
      values.appBoxSet(.isExcludedFromBackupKey, ItemAttributes.isExcluded(path, in: container))
    }
    if asked.contains(.fileProtectionKey), let protectionClass = ItemAttributes.protection(of: path) {
      values.appBoxSet(.fileProtectionKey, protectionClass.urlFileProtection)
    }
    if asked.contains(.volumeAvailableCapacityForImportantUsageKey), let bytes = container.availableImportantCapacity {
      values.appBoxSet(.volumeAvailableCapacityForImportantUsageKey, bytes)
    }
    if asked.contains(.volumeAvailableCapacityForOpportunisticUsageKey),
      let bytes = container.availableOpportunisticCapacity
    {
      values.appBoxSet(.volumeAvailableCapacityForOpportunisticUsageKey, bytes)
    }
    return values
  }
}
