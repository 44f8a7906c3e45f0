import Foundation

extension FileManager {
  /// The container of App Group `groupIdentifier`, as on iOS: for a program that `appbox
  /// run MOUNT --app BUNDLE-ID` started on a device mount, `MOUNT/Containers/Shared/AppGroup/
  /// GROUP-ID` when the app is a member of that group (its container's metadata lists the
  /// group, as iOS's entitlement does), else nil. Outside a device run nil, what Foundation
  /// on Apple's platforms answers a program without the group's entitlement (Foundation on
  /// Linux has no such method). docs/reference.md#a-device.
  public func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? {
    guard let app = DeviceApp.current, app.groups.contains(groupIdentifier) else { return nil }
    return URL(fileURLWithPath: app.deviceRoot + "/Containers/Shared/AppGroup/" + groupIdentifier, isDirectory: true)
  }
}

/// The app a program of a device run runs as: read from `APPBOX_CONTAINER`
/// (`DEVICE/Containers/Data/Application/BUNDLE-ID`) and that container's metadata
/// (`.com.apple.mobile_container_manager.metadata.plist`, the device's record of the app
/// and its groups).
struct DeviceApp {
  /// The device mount's root.
  let deviceRoot: String
  /// The app's bundle id.
  let bundleIdentifier: String
  /// The App Groups it is a member of.
  let groups: Set<String>

  /// The app of this program's run; nil outside a device run, or when its container's
  /// metadata does not name it as an app (then no group is reachable).
  static var current: DeviceApp? {
    guard let container = RunEnvironment.path("APPBOX_CONTAINER") else { return nil }
    return DeviceApp(container: container)
  }

  /// The app whose container is at `container`, if its metadata says so.
  init?(container: String) {
    let parts = container.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    guard parts.count >= 4, Array(parts.suffix(4).prefix(3)) == ["Containers", "Data", "Application"] else {
      return nil
    }
    let id = parts[parts.count - 1]
    let url = URL(fileURLWithPath: container + "/.com.apple.mobile_container_manager.metadata.plist")
    // Absent is the meaning: a container without readable metadata is no device app's.
    guard let data = try? Data(contentsOf: url),
      let plist = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any],
      plist["MCMMetadataIdentifier"] as? String == id,
      (plist["MCMMetadataContentClass"] as? NSNumber)?.intValue == 2
    else { return nil }
    let info = plist["MCMMetadataInfo"] as? [String: Any]
    let groups = info?["com.apple.security.application-groups"] as? [String] ?? []
    deviceRoot = "/" + parts.dropLast(4).joined(separator: "/")
    bundleIdentifier = id
    self.groups = Set(groups)
  }
}
