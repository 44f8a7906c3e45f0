// Apple's documented Data Protection and backup-exclusion code, as Apple's pages show it
// ("Encrypting Your App's Files", FileManager's `attributesOfItem(atPath:)` with
// `.protectionKey`, "Optimizing Your App's Data for iCloud Backup"), wrapped in functions.
// The one change: `import AppBoxKit` where Apple writes `import Foundation` (or UIKit).
// This file must compile unchanged; AppleSampleTests runs it on a mount.
import AppBoxKit

/// Writes `data` with complete protection ("Encrypting Your App's Files").
func appleWriteProtected(_ data: Data, to fileURL: URL) -> Bool {
  do {
    try data.write(to: fileURL, options: .completeFileProtection)
  } catch {
    // Handle errors.
    return false
  }
  return true
}

/// Changes a file's class through FileManager ("Encrypting Your App's Files").
func appleSetProtection(_ protection: FileProtectionType, ofItemAtPath path: String) throws {
  try FileManager.default.setAttributes([.protectionKey: protection], ofItemAtPath: path)
}

/// Reads a file's class and switches over it, as Apple's Data Protection sample does.
func appleProtectionDescription(ofItemAtPath path: String) throws -> String {
  let attributes = try FileManager.default.attributesOfItem(atPath: path)
  guard let protection = attributes[.protectionKey] as? FileProtectionType else { return "unknown" }
  switch protection {
  case .complete:
    return "complete"
  case .completeUnlessOpen:
    return "completeUnlessOpen"
  case .completeUntilFirstUserAuthentication:
    return "completeUntilFirstUserAuthentication"
  case .none:
    return "none"
  default:
    return "other"
  }
}

/// Reads a file's class as a resource value and switches over it.
func appleURLProtectionDescription(_ fileURL: URL) throws -> String {
  let values = try fileURL.resourceValues(forKeys: [.fileProtectionKey])
  switch values.fileProtection {
  case .complete?: return "complete"
  case .completeUnlessOpen?: return "completeUnlessOpen"
  case .completeUntilFirstUserAuthentication?: return "completeUntilFirstUserAuthentication"
  case .none?: return "none"
  default: return "unknown"
  }
}

/// Excludes an item from backup ("Optimizing Your App's Data for iCloud Backup").
func appleExcludeFromBackup(_ url: URL) throws {
  var fileURL = url
  var resourceValues = URLResourceValues()
  resourceValues.isExcludedFromBackup = true
  try fileURL.setResourceValues(resourceValues)
}

/// Reads whether an item is excluded from backup.
func appleIsExcludedFromBackup(_ fileURL: URL) throws -> Bool {
  let resourceValues = try fileURL.resourceValues(forKeys: [.isExcludedFromBackupKey])
  return resourceValues.isExcludedFromBackup ?? false
}
