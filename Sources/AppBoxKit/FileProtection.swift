import Foundation
import SandboxPolicy

// MARK: - Apple's protection names that Foundation on Linux lacks

extension FileProtectionType {
  /// Class CX: as `completeUntilFirstUserAuthentication`, and as `complete` once the device
  /// has been locked for the mount's `--cx-timeout` (iOS 17).
  public static let completeWhenUserInactive = FileProtectionType(rawValue: "NSFileProtectionCompleteWhenUserInactive")
}

// Foundation on Linux declares `FileProtectionType` RawRepresentable but not Equatable, so
// Apple's sample code, which `switch`es over a file's class (`case .complete:`), does not
// compile there; with AppBoxKit it does. Equality and hashing are the raw names'
// (the standard library's defaults for RawRepresentable).
extension FileProtectionType: @retroactive Equatable, @retroactive Hashable {}

extension Data.WritingOptions {
  /// Writes the file with class `completeWhenUserInactive` (iOS 17).
  public static let completeFileProtectionWhenUserInactive = Data.WritingOptions(rawValue: 0x5000_0000)

  /// The bits Apple reserves for the protection class (`NSDataWritingFileProtectionMask`).
  static let protectionMask: UInt = 0xF000_0000
}

/// A file's protection class as a resource value (`URLResourceValues.fileProtection`).
public struct URLFileProtection: RawRepresentable, Hashable, Sendable {
  /// Apple's name, e.g. `NSURLFileProtectionComplete`.
  public let rawValue: String
  /// Creates a value from Apple's name.
  public init(rawValue: String) { self.rawValue = rawValue }

  /// Class A.
  public static let complete = URLFileProtection(rawValue: "NSURLFileProtectionComplete")
  /// Class B.
  public static let completeUnlessOpen = URLFileProtection(rawValue: "NSURLFileProtectionCompleteUnlessOpen")
  /// Class C.
  public static let completeUntilFirstUserAuthentication = URLFileProtection(
    rawValue: "NSURLFileProtectionCompleteUntilFirstUserAuthentication")
  /// Class CX.
  public static let completeWhenUserInactive = URLFileProtection(
    rawValue: "NSURLFileProtectionCompleteWhenUserInactive")
  /// Class D.
  public static let none = URLFileProtection(rawValue: "NSURLFileProtectionNone")
}

// MARK: - Between Apple's names and AppBox's classes

extension ProtectionClass {
  /// The class a `Data.WritingOptions` asks for, if any.
  init?(writingOptions options: Data.WritingOptions) {
    switch options.rawValue & Data.WritingOptions.protectionMask {
    case Data.WritingOptions.noFileProtection.rawValue: self = .none
    case Data.WritingOptions.completeFileProtection.rawValue: self = .complete
    case Data.WritingOptions.completeFileProtectionUnlessOpen.rawValue: self = .completeUnlessOpen
    case Data.WritingOptions.completeFileProtectionUntilFirstUserAuthentication.rawValue:
      self = .completeUntilFirstUserAuthentication
    case Data.WritingOptions.completeFileProtectionWhenUserInactive.rawValue: self = .completeWhenUserInactive
    default: return nil
    }
  }

  /// The class a `FileAttributeKey.protectionKey` value names (a `FileProtectionType` or
  /// its raw string).
  init?(attributeValue value: Any) {
    if let type = value as? FileProtectionType {
      self.init(parsing: type.rawValue)
    } else if let text = value as? String {
      self.init(parsing: text)
    } else {
      return nil
    }
  }

  /// Foundation's `FileProtectionType`.
  var fileProtectionType: FileProtectionType { FileProtectionType(rawValue: foundationName) }

  /// Foundation's `URLFileProtection`.
  var urlFileProtection: URLFileProtection {
    switch self {
    case .complete: .complete
    case .completeUnlessOpen: .completeUnlessOpen
    case .completeUntilFirstUserAuthentication: .completeUntilFirstUserAuthentication
    case .completeWhenUserInactive: .completeWhenUserInactive
    case .none: .none
    }
  }
}
