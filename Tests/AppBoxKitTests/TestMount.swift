import AppBoxKit
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A temporary directory, removed at release.
final class TemporaryDirectory {
  let path: String

  init() throws {
    var template = Array("/tmp/appboxkit-test-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
    path = String(cString: made)
  }

  deinit {
    do { try FileManager.default.removeItem(atPath: path) } catch { print("cannot remove \(path): \(error)") }
  }
}

/// A sandbox mounted UNLOCKED by the `appbox` binary built next to the tests, in a
/// temporary directory (`backing/`, `mnt/`).
final class TestMount {
  let directory: TemporaryDirectory
  var mountpoint: String { directory.path + "/mnt" }
  var backing: String { directory.path + "/backing" }
  private var mounted = false

  static let appbox: String = {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let exe = String(decoding: buffer[..<max(count, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return (exe as NSString).deletingLastPathComponent + "/appbox"
  }()

  init(_ options: [String] = []) throws {
    directory = try TemporaryDirectory()
    try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: false)
    try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: false)
    try appbox(["mount", "--unlocked", "--backing", backing] + options + [mountpoint])
    mounted = true
  }

  deinit {
    if mounted { _ = try? appbox(["unmount", "--lazy", mountpoint]) }
  }

  /// A path inside the mount.
  func path(_ relative: String) -> String { mountpoint + "/" + relative }

  /// Runs `appbox` and requires success.
  func appbox(_ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Self.appbox)
    process.arguments = arguments
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "appbox \(arguments) failed"])
    }
  }

  /// Unmounts (and fails the test if that fails).
  func unmount() throws {
    try appbox(["unmount", mountpoint])
    mounted = false
  }

  /// An attribute of a backing file, as bytes.
  func backingXattrBytes(_ relative: String, _ name: String) throws -> [UInt8] {
    try Self.xattr(backing + "/" + relative, name)
  }

  /// An attribute of a backing file, as text.
  func backingXattr(_ relative: String, _ name: String) throws -> String {
    String(decoding: try backingXattrBytes(relative, name), as: UTF8.self)
  }

  /// An attribute of the mount's root, as text.
  func rootXattr(_ name: String) throws -> String {
    String(decoding: try Self.xattr(mountpoint, name), as: UTF8.self)
  }

  static func xattr(_ path: String, _ name: String) throws -> [UInt8] {
    try Xattr.value(path: path, name: name)
  }
}
