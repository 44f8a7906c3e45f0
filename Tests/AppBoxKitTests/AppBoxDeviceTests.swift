import Testing

// @testable: the test binds appbox run's variables for its own calls (RunEnvironment)
// instead of setting them in the process, whose other tests start processes meanwhile.
@testable import AppBoxKit

/// `AppBoxDevice` against a real mount, as a program that `appbox run
/// --allow-device-control` started sees it, and outside one.
@Suite("AppBoxDevice", .timeLimit(.minutes(5)))
struct AppBoxDeviceTests {
  @Test("refused without appbox run's variables; with them it purges and reads the status")
  func deviceControl() throws {
    let mount = try TestMount(["--capacity", "16M"])
    try Data(count: 2 << 20).write(to: URL(fileURLWithPath: mount.path("Library/Caches/old")))
    try Data(count: 2 << 20).write(to: URL(fileURLWithPath: mount.path("Library/Caches/new")))
    RunEnvironment.$override.withValue([:]) {
      #expect(!AppBoxDevice.isAllowed)
      #expect(throws: AppBoxDevice.ControlError.notAllowed) { try AppBoxDevice.statusJSON() }
    }
    let variables = ["APPBOX_CONTAINER": mount.mountpoint, "APPBOX_DEVICE_CONTROL": TestMount.appbox]
    try RunEnvironment.$override.withValue(variables) {
      #expect(AppBoxDevice.isAllowed)
      let status = try #require(
        try JSONSerialization.jsonObject(with: Data(AppBoxDevice.statusJSON().utf8)) as? [String: Any])
      #expect((status["capacity"] as? NSNumber)?.int64Value == 16 << 20)
      #expect(status["state"] as? String == "UNLOCKED")
      // The least recently used file is enough for one byte.
      let purged = try AppBoxDevice.purge(bytes: 1)
      #expect(purged.hasPrefix("purged 1 file, "), "\(purged)")
      #expect(!FileManager.default.fileExists(atPath: mount.path("Library/Caches/old")))
      #expect(FileManager.default.fileExists(atPath: mount.path("Library/Caches/new")))
      do throws(AppBoxDevice.ControlError) {
        _ = try AppBoxDevice.purge(bytes: -1)
        Issue.record("a negative size was accepted")
      } catch {
        guard case .failed(let code, let message) = error else { throw error }
        #expect(code == 65, "a bad size: \(message)")
      }
    }
    try mount.unmount()
  }
}
