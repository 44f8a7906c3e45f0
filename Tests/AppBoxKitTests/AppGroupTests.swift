import Testing

@testable import AppBoxKit

/// `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)` from the app's
/// container metadata (docs/reference.md#a-device); on a device mount, the example pair
/// (MountTests.WidgetExampleTests) uses it.
@Suite("App Groups")
struct AppGroupTests {
  /// A device-like tree with one app's container and its metadata plist (binary, as the
  /// daemon writes it).
  static func device(app: String, groups: [String], contentClass: Int = 2) throws -> String {
    let root = NSTemporaryDirectory() + "appbox-groups-" + UUID().uuidString
    let container = root + "/Containers/Data/Application/" + app
    try FileManager.default.createDirectory(atPath: container, withIntermediateDirectories: true)
    let plist: [String: Any] = [
      "MCMMetadataIdentifier": app, "MCMMetadataContentClass": contentClass,
      "MCMMetadataInfo": ["com.apple.security.application-groups": groups],
    ]
    let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0)
    try data.write(to: URL(fileURLWithPath: container + "/.com.apple.mobile_container_manager.metadata.plist"))
    return root
  }

  @Test("a member app gets its group's container; another group, or no device run, gets nil")
  func memberOrNot() throws {
    let root = try Self.device(app: "com.example.widget", groups: ["group.com.example.shared"])
    defer { try? FileManager.default.removeItem(atPath: root) }
    let container = root + "/Containers/Data/Application/com.example.widget"
    RunEnvironment.$override.withValue(["APPBOX_CONTAINER": container]) {
      let url = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.shared")
      #expect(url?.path == root + "/Containers/Shared/AppGroup/group.com.example.shared")
      #expect(FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.other") == nil)
      #expect(FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "../../x") == nil)
    }
    // A plain run (its container is a mount's root) and no run at all: nil.
    RunEnvironment.$override.withValue(["APPBOX_CONTAINER": root]) {
      #expect(
        FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.shared") == nil)
    }
    RunEnvironment.$override.withValue([:]) {
      #expect(
        FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.shared") == nil)
    }
  }

  @Test("metadata that names another app, or a group's kind, gives no group")
  func metadataChecked() throws {
    let root = try Self.device(app: "com.example.widget", groups: ["group.com.example.shared"], contentClass: 7)
    defer { try? FileManager.default.removeItem(atPath: root) }
    RunEnvironment.$override.withValue(["APPBOX_CONTAINER": root + "/Containers/Data/Application/com.example.widget"]) {
      #expect(
        FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.shared") == nil)
    }
  }
}
