import Foundation
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

/// Reading and writing AppBox's per-item attributes on a mount, as Foundation errors.
enum ItemAttributes {
  /// The item's effective class (its own, inherited or the mount's default), or nil when
  /// it has none to read (a symlink whose target is missing, an item removed meanwhile):
  /// then the caller reports no class, as Foundation does, rather than an error.
  static func protection(of path: String) -> ProtectionClass? {
    do throws(Errno) {
      return ProtectionClass(parsing: try Xattr.value(path: path, name: AppBoxAttribute.protection.name))
    } catch {
      return nil
    }
  }

  /// Sets the item's class; EPERM (as `CocoaError.fileWriteNoPermission`) when its current
  /// or new class is closed in the device's state.
  static func setProtection(_ protectionClass: ProtectionClass, of path: String) throws {
    do throws(Errno) {
      try Xattr.set(path: path, name: AppBoxAttribute.protection.name, value: Array(protectionClass.name.utf8))
    } catch {
      throw FoundationError.writing(error, path: path)
    }
  }

  /// Refuses (EPERM, as `CocoaError.fileWriteNoPermission`) to give a file a class whose
  /// content is closed in the device's state now, as Apple's filesystems refuse it (docs/reference.md#data-protection:
  /// both the current and the new class must be accessible; the mount checks the current
  /// one). `operation` is `.createNew` for a file being created. The CX timeout is not
  /// visible from here: CX counts as C, and the mount refuses its I/O once it expires.
  static func checkAccessible(
    _ protectionClass: ProtectionClass, _ operation: ProtectedOperation, in container: AppBoxContainer, path: String
  ) throws {
    guard let state = container.deviceState else { return }
    guard AccessRule.decide(protectionClass, operation, state: state, cxExpired: false) else {
      throw FoundationError.writing(.notPermitted, path: path)
    }
  }

  /// Whether the item carries Apple's backup-exclusion attribute (modern or legacy).
  static func hasExclusion(_ path: String) -> Bool {
    [BackupExclusion.attributeName, BackupExclusion.legacyAttributeName].contains { name in
      do throws(Errno) {
        _ = try Xattr.value(path: path, name: name)
        return true
      } catch {
        return false
      }
    }
  }

  /// Whether the item or a directory above it, up to the container root, is excluded.
  static func isExcluded(_ path: String, in container: AppBoxContainer) -> Bool {
    var candidate = (path as NSString).standardizingPath
    while candidate.count > container.root.count {
      if hasExclusion(candidate) { return true }
      candidate = (candidate as NSString).deletingLastPathComponent
    }
    return false
  }

  /// Marks the item excluded (Apple's modern attribute and value) or not (both of Apple's
  /// attributes removed).
  static func setExcluded(_ excluded: Bool, _ path: String) throws {
    do throws(Errno) {
      if excluded {
        try Xattr.set(path: path, name: BackupExclusion.attributeName, value: BackupExclusion.appleValue)
        return
      }
      for name in [BackupExclusion.attributeName, BackupExclusion.legacyAttributeName] {
        do throws(Errno) { try Xattr.remove(path: path, name: name) } catch  where error == .noData {}
      }
    } catch {
      throw FoundationError.writing(error, path: path)
    }
  }

  /// Removes a file this library created, after a failure: the failure is what the caller
  /// hears about, so an error here (the file already gone) is not reported.
  static func discard(_ path: String) {
    do throws(Errno) { try Sys.unlinkat(AT_FDCWD, path, 0) } catch {}
  }
}
