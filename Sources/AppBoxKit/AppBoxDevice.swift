import Foundation

/// Control of the simulated device from the program itself, for test suites that lock the
/// device at a chosen moment: available when `appbox run --allow-device-control` started
/// the program (it names the `appbox` binary in `APPBOX_DEVICE_CONTROL`), refused
/// otherwise. Each call runs `appbox lock|unlock|purge|status` on the container.
public enum AppBoxDevice {
  /// Why a device-control call failed.
  public enum ControlError: Error, Equatable, CustomStringConvertible {
    /// The run did not allow device control, or the program is not in an AppBox container.
    case notAllowed
    /// `appbox` exited with this status and message.
    case failed(status: Int32, message: String)

    public var description: String {
      switch self {
      case .notAllowed: "device control is off: start the program with appbox run --allow-device-control"
      case .failed(let status, let message): "appbox exited \(status): \(message)"
      }
    }
  }

  /// Whether this program may control the device.
  public static var isAllowed: Bool { executable != nil && AppBoxContainer.current != nil }

  /// Locks the device (UNLOCKED → GRACE → LOCKED after the mount's grace period).
  /// - Returns: the state right after (`GRACE` or `LOCKED`).
  @discardableResult
  public static func lock() throws(ControlError) -> String { try run(["lock"]) }

  /// Unlocks the device.
  /// - Returns: the state right after (`UNLOCKED`).
  @discardableResult
  public static func unlock() throws(ControlError) -> String { try run(["unlock"]) }

  /// Purges at least `bytes` (tmp first, then Caches; as `appbox purge --bytes`).
  /// - Returns: what `appbox` reported (`purged N files, SIZE`).
  @discardableResult
  public static func purge(bytes: Int64) throws(ControlError) -> String {
    try run(["purge", "--bytes", String(bytes)])
  }

  /// The mount's status as `appbox status --json` prints it.
  public static func statusJSON() throws(ControlError) -> String { try run(["status", "--json"]) }

  private static var executable: String? { RunEnvironment.path("APPBOX_DEVICE_CONTROL") }

  /// Runs `appbox VERB [ARGS] ROOT`, returning its output without the final newline.
  private static func run(_ arguments: [String]) throws(ControlError) -> String {
    guard let executable, let container = AppBoxContainer.current else { throw .notAllowed }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = [arguments[0], container.root] + arguments.dropFirst()
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    do { try process.run() } catch { throw .failed(status: 127, message: "\(error)") }
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw .failed(status: process.terminationStatus, message: message.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    return text.trimmingCharacters(in: .whitespacesAndNewlines)
  }
}
