import Foundation

/// What `appbox run` tells its program through the environment (`APPBOX_CONTAINER`,
/// `APPBOX_EVENTS`, `APPBOX_DEVICE_CONTROL`): absolute paths, anything else ignored.
enum RunEnvironment {
  /// Variables to read instead of the process's, for the calls made while bound
  /// (`$override.withValue`): a test's, since changing the process's environment races
  /// with every thread that starts a process.
  @TaskLocal static var override: [String: String]?

  /// The variable `name`, if it holds an absolute path.
  static func path(_ name: String) -> String? {
    (override ?? ProcessInfo.processInfo.environment)[name].flatMap { $0.hasPrefix("/") ? $0 : nil }
  }
}
