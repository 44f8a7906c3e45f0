import Foundation
import PlainFoundation
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

extension Data {
  /// Foundation's `write(to:options:)`, honouring the protection options
  /// (`.completeFileProtection`…) on an AppBox mount, as iOS does: the file has the class
  /// before the first byte is written, and an atomic write gives the class to the
  /// temporary file that replaces the target. A class closed in the device's state (say
  /// `complete` while locked) is refused with `CocoaError.fileWriteNoPermission` and the
  /// target is left as it was. Elsewhere, plain Foundation.
  public func write(to url: URL, options: Data.WritingOptions = []) throws {
    let protectionClass = ProtectionClass(writingOptions: options)
    let plainOptions = Data.WritingOptions(rawValue: options.rawValue & ~Data.WritingOptions.protectionMask)
    guard url.isFileURL, let protectionClass,
      let container = AppBoxContainer.containing(url.deletingLastPathComponent().path)
    else {
      try PlainFoundation.write(self, to: url, options: plainOptions)
      return
    }
    let exists = FileManager.default.fileExists(atPath: url.path)
    try ItemAttributes.checkAccessible(
      protectionClass, exists && !options.contains(.atomic) ? .openExisting : .createNew, in: container, path: url.path)
    if options.contains(.atomic) {
      try writeAtomically(to: url, protectionClass, noOverwrite: options.contains(.withoutOverwriting))
    } else {
      try writeInPlace(to: url, protectionClass, options: plainOptions)
    }
  }

  /// Creates the file if needed, sets its class, then writes into it.
  private func writeInPlace(to url: URL, _ protectionClass: ProtectionClass, options: Data.WritingOptions) throws {
    let path = url.path
    let created = !FileManager.default.fileExists(atPath: path)
    if created {
      try PlainFoundation.write(Data(), to: url, options: .withoutOverwriting)
    } else if options.contains(.withoutOverwriting) {
      throw FoundationError.writing(.exists, path: path)
    }
    do {
      try ItemAttributes.setProtection(protectionClass, of: path)
    } catch {
      if created { ItemAttributes.discard(path) }
      throw error
    }
    try PlainFoundation.write(self, to: url, options: options.subtracting(.withoutOverwriting))
  }

  /// Writes a temporary file of the class next to the target and renames it into place.
  private func writeAtomically(to url: URL, _ protectionClass: ProtectionClass, noOverwrite: Bool) throws {
    let path = url.path
    let directory = url.deletingLastPathComponent()
    let temporary = directory.appendingPathComponent(
      ".\(url.lastPathComponent).appbox-\(UInt32.random(in: .min ... .max))")
    try PlainFoundation.write(Data(), to: temporary, options: .withoutOverwriting)
    do {
      try ItemAttributes.setProtection(protectionClass, of: temporary.path)
      try PlainFoundation.write(self, to: temporary, options: [])
      do throws(Errno) {
        try Sys.renameat2(
          AT_FDCWD, temporary.path, AT_FDCWD, path, noOverwrite ? Linux.renameNoReplace : UInt32(0))
      } catch {
        throw FoundationError.writing(error, path: path)
      }
    } catch {
      ItemAttributes.discard(temporary.path)
      throw error
    }
  }
}
