import Foundation
import PlainFoundation
import SandboxPolicy

extension FileManager {
  /// Foundation's `setAttributes(_:ofItemAtPath:)`; on an AppBox mount `.protectionKey`
  /// sets the item's class (`CocoaError.fileWriteNoPermission` when a file's current or
  /// new class is closed now; a directory's class, the default for its new items, can be
  /// changed in any state).
  public func setAttributes(_ attributes: [FileAttributeKey: Any], ofItemAtPath path: String) throws {
    var rest = attributes
    if let value = rest.removeValue(forKey: .protectionKey), let container = AppBoxContainer.containing(path) {
      guard let protectionClass = ProtectionClass(attributeValue: value) else {
        throw FoundationError.writing(.invalidArgument, path: path)
      }
      var isDirectory: ObjCBool = false
      if fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
        try ItemAttributes.checkAccessible(protectionClass, .openExisting, in: container, path: path)
      }
      try ItemAttributes.setProtection(protectionClass, of: path)
    } else if let value = attributes[.protectionKey] {
      rest[.protectionKey] = value  // plain Foundation, as without AppBoxKit
    }
    if !rest.isEmpty { try PlainFoundation.setAttributes(rest, ofItemAtPath: path, in: self) }
  }

  /// Foundation's `attributesOfItem(atPath:)`; on an AppBox mount `.protectionKey` holds
  /// the item's class (its own, its directory's, or the mount's default).
  public func attributesOfItem(atPath path: String) throws -> [FileAttributeKey: Any] {
    var attributes = try PlainFoundation.attributesOfItem(atPath: path, in: self)
    if AppBoxContainer.containing(path) != nil, let protectionClass = ItemAttributes.protection(of: path) {
      attributes[.protectionKey] = protectionClass.fileProtectionType
    }
    return attributes
  }

  /// Foundation's `createFile(atPath:contents:attributes:)`; on an AppBox mount a
  /// `.protectionKey` class is set before the contents are written. Returns false when
  /// the file cannot be created or the class is closed now.
  public func createFile(atPath path: String, contents: Data?, attributes: [FileAttributeKey: Any]? = nil) -> Bool {
    guard let value = attributes?[.protectionKey], let protectionClass = ProtectionClass(attributeValue: value),
      let container = AppBoxContainer.containing((path as NSString).deletingLastPathComponent)
    else {
      return PlainFoundation.createFile(atPath: path, contents: contents, attributes: attributes, in: self)
    }
    do { try ItemAttributes.checkAccessible(protectionClass, .createNew, in: container, path: path) } catch {
      return false
    }
    var rest = attributes ?? [:]
    rest[.protectionKey] = nil
    guard PlainFoundation.createFile(atPath: path, contents: nil, attributes: rest, in: self) else { return false }
    do { try ItemAttributes.setProtection(protectionClass, of: path) } catch {
      ItemAttributes.discard(path)
      return false
    }
    guard let contents else { return true }
    do { try PlainFoundation.write(contents, to: URL(fileURLWithPath: path), options: []) } catch { return false }
    return true
  }
}
