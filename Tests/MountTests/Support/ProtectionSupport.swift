import CPosixShim
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Data Protection test vocabulary
//
// The tests spell classes, states and expected outcomes themselves (not through
// SandboxPolicy), so that a wrong table in the product cannot make its own test pass.

/// The outcome of one operation: success, or the errno it failed with.
enum Outcome: Equatable, CustomStringConvertible, Sendable {
  case ok
  case failed(Int32)

  static let eperm = Outcome.failed(EPERM)

  init(_ result: Int32) { self = result < 0 ? .failed(errno) : .ok }

  var description: String {
    switch self {
    case .ok: "ok"
    case .failed(let code): code == EPERM ? "EPERM" : "errno \(code) (\(String(cString: strerror(code))))"
    }
  }
}

/// The attribute names on the mount.
enum ProtectionAttribute {
  static let protection = "user.appbox.protection"
  static let deviceState = "user.appbox.device-state"
}

// MARK: - Syscall helpers

enum Sys2 {
  /// `getxattr` as a string (trailing NUL dropped), or the errno.
  static func getxattr(_ path: String, _ name: String) -> Result<String, POSIXError> {
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = cposix_getxattr(path, name, &buffer, buffer.count)
    guard count >= 0 else { return .failure(POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)) }
    var bytes = Array(buffer[..<count])
    if bytes.last == 0 { bytes.removeLast() }
    return .success(String(decoding: bytes, as: UTF8.self))
  }

  /// `setxattr`: 0, or the errno.
  @discardableResult
  static func setxattr(_ path: String, _ name: String, _ value: String) -> Int32 {
    let bytes = Array(value.utf8)
    let result = bytes.withUnsafeBytes { cposix_setxattr(path, name, $0.baseAddress, $0.count, 0) }
    return result == 0 ? 0 : errno
  }

  /// `removexattr`: 0 or -1 with errno.
  static func removexattr(_ path: String, _ name: String) -> Int32 { cposix_removexattr(path, name) }

  /// `fallocate`: 0 or -1 with errno.
  static func fallocate(_ fd: Int32, _ offset: off_t, _ length: off_t) -> Int32 {
    cposix_fallocate(fd, 0, offset, length)
  }

  /// The class the mount reports for `path`.
  static func protection(_ path: String) -> String? {
    try? getxattr(path, ProtectionAttribute.protection).get()
  }

  /// Writes `contents` to a new file (outside the mount: the backing tree).
  static func write(_ path: String, _ contents: String) throws {
    try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
  }

  /// Creates a backing directory or file and gives it a class, as a copied or prepared
  /// backing tree would have it.
  static func classify(_ path: String, _ protectionClass: TestClass) throws {
    let code = setxattr(path, ProtectionAttribute.protection, protectionClass.name)
    guard code == 0 else { throw FixtureError("setxattr \(path): errno \(code)") }
  }

  /// `pread` of up to `count` bytes at `offset`.
  static func pread(_ fd: Int32, count: Int = 64, offset: off_t = 0) -> (Outcome, String) {
    var buffer = [UInt8](repeating: 0, count: count)
    let n = Glibc.pread(fd, &buffer, count, offset)
    guard n >= 0 else { return (.failed(errno), "") }
    return (.ok, String(decoding: buffer[..<n], as: UTF8.self))
  }

  /// `pwrite` of `text` at `offset`; a short write is a failure (EIO).
  static func pwrite(_ fd: Int32, _ text: String, offset: off_t = 0) -> Outcome {
    let bytes = Array(text.utf8)
    let n = bytes.withUnsafeBytes { Glibc.pwrite(fd, $0.baseAddress, $0.count, offset) }
    if n < 0 { return .failed(errno) }
    return n == bytes.count ? .ok : .failed(EIO)
  }

  /// `open`: the descriptor or the failure.
  static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0o644) -> (Int32, Outcome) {
    let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
    return (fd, Outcome(fd))
  }

  /// `open` and close again: only the outcome.
  static func tryOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0o644) -> Outcome {
    let (fd, outcome) = open(path, flags, mode)
    if fd >= 0 { close(fd) }
    return outcome
  }
}

// MARK: - Lock control

extension MountFixture {
  /// The device state the mount's root reports.
  var deviceState: String? { try? Sys2.getxattr(mountpoint, ProtectionAttribute.deviceState).get() }

  /// Runs `appbox VERB MOUNTPOINT` and requires it to succeed.
  func control(_ verb: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let result = try Command.run(Command.appbox, [verb, mountpoint])
    try #require(result.status == 0, "appbox \(verb): \(result.status) \(result.error)", sourceLocation: sourceLocation)
  }

  /// Waits (deadline, polling) until the device state is `state`.
  func waitForState(_ state: String, seconds: Double = 10, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let reached = waitUntil(seconds: seconds) { deviceState == state }
    try #require(reached, "state is \(deviceState ?? "?"), expected \(state)", sourceLocation: sourceLocation)
  }

  /// `appbox status --json`, parsed.
  func status() throws -> [String: Any] {
    let result = try Command.run(Command.appbox, ["status", "--json", mountpoint])
    guard result.status == 0,
      let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
    else { throw FixtureError("appbox status --json exited \(result.status): \(result.error)\(result.output)") }
    return object
  }

  /// The daemon's count of one request operation (`status --json`'s `requests`).
  func requestCount(_ operation: String) throws -> Int {
    ((try status()["requests"] as? [String: Any])?[operation] as? NSNumber)?.intValue ?? 0
  }

  /// Waits until `appbox status` says the CX inactivity timeout has run out.
  func waitForCXExpiry(seconds: Double = 10, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let expired = waitUntil(seconds: seconds) { ((try? status())?["cxExpired"] as? Bool) == true }
    try #require(expired, "cxExpired never became true", sourceLocation: sourceLocation)
  }

  /// `appbox events`, parsed line by line.
  func events() throws -> [[String: Any]] {
    let result = try Command.run(Command.appbox, ["events", mountpoint])
    guard result.status == 0 else { throw FixtureError("appbox events exited \(result.status): \(result.error)") }
    return result.output.split(separator: "\n").compactMap {
      try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
    }
  }
}

// MARK: - A mount of an existing backing directory

/// Mounts a backing directory the test owns (so it can be mounted again after an
/// unmount), at a mountpoint in the same temporary root. Unmounted by ``unmount()`` or, as
/// a last resort, lazily at deinit.
final class BackingMount {
  let directories: SandboxDirectories
  var root: String { directories.root }
  var backing: String { directories.backing }
  var mountpoint: String { directories.mountpoint }
  private var mounted = false

  /// Creates a temporary root with `backing/` and `mnt/`.
  init() throws {
    directories = try SandboxDirectories(prefix: "appbox-remount")
  }

  func path(_ relative: String) -> String { mountpoint + "/" + relative }
  func backingPath(_ relative: String) -> String { backing + "/" + relative }

  /// `appbox mount --backing BACKING [arguments] MOUNTPOINT`.
  func mount(_ arguments: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) throws {
    let result = try Command.run(Command.appbox, ["mount", "--backing", backing] + arguments + [mountpoint])
    try #require(result.status == 0, "appbox mount: \(result.status) \(result.error)", sourceLocation: sourceLocation)
    try #require(MountFixture.isMounted(mountpoint), sourceLocation: sourceLocation)
    mounted = true
  }

  /// `appbox unmount MOUNTPOINT`, and waits for the mount to be gone.
  func unmount(sourceLocation: SourceLocation = #_sourceLocation) throws {
    guard mounted else { return }
    let result = try Command.run(Command.appbox, ["unmount", mountpoint])
    try #require(result.status == 0, "appbox unmount: \(result.error)", sourceLocation: sourceLocation)
    mounted = false
    #expect(!MountFixture.isMounted(mountpoint), sourceLocation: sourceLocation)
  }
}

// MARK: - The daemon's control files

enum ControlFiles {
  /// `<runtime directory>/<FNV-1a of the mountpoint, hex>.<suffix>`: where a root daemon
  /// keeps its socket and event log.
  static func path(for mountpoint: String, _ suffix: String) -> String {
    directory + "/" + name(for: mountpoint, suffix)
  }

  /// The file name (in any runtime directory) of a mount's `suffix` file.
  static func name(for mountpoint: String, _ suffix: String) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in mountpoint.utf8 {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    return String(hash, radix: 16) + "." + suffix
  }

  /// The current mount's event log (`<hash>.events.d/ID.jsonl`, the newest id: ids sort
  /// by the mount's start) in the runtime directory; nil when there is none.
  static func eventLog(for mountpoint: String, in runtime: String = directory) -> String? {
    let logs = runtime + "/" + name(for: mountpoint, "events.d")
    let names = (try? FileManager.default.contentsOfDirectory(atPath: logs)) ?? []  // none yet: nil
    let current = names.filter { $0.hasSuffix(".jsonl") && !$0.hasSuffix(".1.jsonl") }.sorted().last
    return current.map { logs + "/" + $0 }
  }

  /// A root daemon's runtime directory: `$XDG_RUNTIME_DIR/appbox`, else `/run/appbox`.
  static var directory: String {
    if let xdg = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], xdg.hasPrefix("/") { return xdg + "/appbox" }
    return "/run/appbox"
  }
}
