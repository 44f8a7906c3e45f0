@_exported import Foundation
import Posix
import SandboxPolicy

/// An AppBox mount's container root, found from a path inside it: the only directory of a
/// mount with the read-only attribute `user.appbox.device-state`.
public struct AppBoxContainer: Sendable, Hashable {
  /// The mount's root directory.
  public let root: String

  /// The container that `appbox run` started this program in (`APPBOX_CONTAINER`), if it
  /// is an AppBox mount.
  public static var current: AppBoxContainer? {
    guard let root = RunEnvironment.path("APPBOX_CONTAINER") else { return nil }
    return isRoot(root) ? AppBoxContainer(root: root) : nil
  }

  /// The container holding `path` (which need not exist), or nil outside AppBox mounts.
  /// Checks `APPBOX_CONTAINER` first (one attribute read), else each ancestor.
  public static func containing(_ path: String) -> AppBoxContainer? {
    let absolute = (path as NSString).standardizingPath
    if let hinted = RunEnvironment.path("APPBOX_CONTAINER"),
      absolute == hinted || absolute.hasPrefix(hinted.hasSuffix("/") ? hinted : hinted + "/"), isRoot(hinted)
    {
      return AppBoxContainer(root: hinted)
    }
    var candidate = absolute
    while true {
      if isRoot(candidate) { return AppBoxContainer(root: candidate) }
      guard candidate != "/", !candidate.isEmpty else { return nil }
      candidate = (candidate as NSString).deletingLastPathComponent
    }
  }

  /// Whether `path` is the root of an AppBox mount.
  static func isRoot(_ path: String) -> Bool {
    do throws(Errno) {
      _ = try Xattr.value(path: path, name: AppBoxAttribute.deviceState.name)
      return true
    } catch {
      return false
    }
  }

  /// The user who mounted the container (the kernel's `user_id=` of the AppBox mount its
  /// root is on, found by device number in the mount table): whose daemon writes its event
  /// log. Nil when it cannot be found.
  var mountOwner: uid_t? {
    // Absent is the meaning of each `try?`: an owner that cannot be read is not known.
    guard let st = try? Sys.statPath(root), let mounts = try? Sys.mounts() else { return nil }
    return mounts.last { $0.type == "fuse.appbox" && $0.deviceNumber == st.st_dev }?.ownerUID
  }

  /// A read-only attribute of the root, as text.
  func rootValue(_ attribute: AppBoxAttribute) -> String? {
    do throws(Errno) {
      return String(decoding: try Xattr.value(path: root, name: attribute.name), as: UTF8.self)
    } catch {
      return nil
    }
  }

  /// The simulated device's state now (nil if the mount stopped answering).
  public var deviceState: DeviceState? { rootValue(.deviceState).flatMap(DeviceState.init(name:)) }

  /// Free bytes plus everything purgeable (`user.appbox.available-important`).
  public var availableImportantCapacity: Int64? { rootValue(.availableImportant).flatMap { Int64($0) } }

  /// Free bytes plus purgeable tmp (`user.appbox.available-opportunistic`).
  public var availableOpportunisticCapacity: Int64? { rootValue(.availableOpportunistic).flatMap { Int64($0) } }
}

/// Foundation-shaped errors for the calls AppBoxKit makes itself.
enum FoundationError {
  /// The `CocoaError` Foundation throws for `errno` while writing `path` (with the
  /// `POSIXError` as underlying error, as Foundation does).
  static func writing(_ errno: Errno, path: String) -> CocoaError {
    let code: CocoaError.Code
    switch errno.rawValue {
    case EPERM, EACCES: code = .fileWriteNoPermission
    case ENOENT: code = .fileNoSuchFile
    case EEXIST: code = .fileWriteFileExists
    case ENOSPC, EDQUOT: code = .fileWriteOutOfSpace
    case EROFS: code = .fileWriteVolumeReadOnly
    case ENAMETOOLONG: code = .fileWriteInvalidFileName
    default: code = .fileWriteUnknown
    }
    return CocoaError(
      code,
      userInfo: [
        NSFilePathErrorKey: path,
        NSUnderlyingErrorKey: NSError(domain: NSPOSIXErrorDomain, code: Int(errno.rawValue)),
      ])
  }
}
