import AppBoxFS
import FilesystemInterface
import Foundation
import Posix
import Testing

@testable import AppBoxCLI

/// A driver without a kernel, for a filesystem the control server can answer about.
struct NoKernel: FilesystemDriver {
  struct NoPassthrough: PassthroughFiles {
    var isAvailable: Bool { false }
    func register(_ fd: Int32) -> BackingID? { nil }
    func unregister(_ id: BackingID) {}
  }
  var passthrough: any PassthroughFiles { NoPassthrough() }
  func handOff() {}
  var busyPoll: (microseconds: UInt32, polled: UInt64, waited: UInt64) { (0, 0, 0) }
  var requestCounts: [(operation: String, count: UInt64)] { [] }
  var transport: TransportStatus { TransportStatus(inUse: .devFuse, requested: .devFuse) }
}

/// A sandbox over a temporary backing directory, not mounted, and a runtime directory for
/// a control server that this process runs for it (``server(gate:bound:)``): the control
/// channel without a kernel mount, with a gate and hooks of the test's own.
final class ServedSandbox {
  /// The temporary directory holding everything (removed at the end).
  let base: String
  /// The filesystem the server answers for (UNLOCKED).
  let filesystem: SandboxFilesystem
  /// The runtime directory, opened as the daemon opens its own.
  let runtime: RuntimeDirectory
  /// The socket's name in ``runtime``.
  let socketName = "control.sock"

  init(name: String) throws {
    base = NSTemporaryDirectory() + "appbox-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    try Sys.mkdir(base, 0o700)
    try Sys.mkdir(base + "/backing", 0o755)
    var options = SandboxOptions()
    options.startUnlocked = true
    options.gracePeriod = 0
    filesystem = try SandboxFilesystem(
      backingDirectory: base + "/backing", configuration: CacheTimeouts(), options: options, driver: NoKernel())
    guard case .opened(let directory) = try RuntimeDirectory.open(base + "/run", for: geteuid(), create: true) else {
      throw CLIError(.osError, "\(base)/run was not opened as a runtime directory")
    }
    runtime = directory
  }

  deinit { try? FileManager.default.removeItem(atPath: base) }

  /// A control server for the filesystem on ``socketName`` (not started).
  func server(
    gate: DeviceControlGate = DeviceControlGate(), bound: (@Sendable (DeviceControlGate.Peer) -> Void)? = nil
  ) throws -> ControlServer {
    try ControlServer(
      directory: runtime.fd, socket: socketName, filesystem: filesystem, mountpoint: "/nonexistent", gate: gate,
      bound: bound)
  }

  /// The socket's path (through the runtime directory's descriptor), for other processes.
  var socketPath: String { runtime.path + "/" + socketName }

  /// A new connection to the server.
  func connect() throws -> Int32 { try UnixSocket.connect(in: runtime.fd, socketName) }

  /// Sends `line` (a newline added) on a new connection and returns the reply line
  /// (empty when none came within `seconds`).
  func request(_ line: String, seconds: Double = 30) throws -> String {
    let fd = try connect()
    defer { Sys.close(fd) }
    let deadline = Clock.monotonic() + seconds
    UnixSocket.writeAll(fd, Array((line + "\n").utf8), deadline: deadline)
    return String(decoding: UnixSocket.readLine(fd, deadline: deadline).line ?? [], as: UTF8.self)
  }
}
