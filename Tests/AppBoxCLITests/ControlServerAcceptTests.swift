import AppBoxFS
import FilesystemInterface
import Foundation
import Posix
import Testing

@testable import AppBoxCLI

/// A driver without a kernel, for a filesystem the control server can answer about.
private struct NoKernel: FilesystemDriver {
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

/// The time limit is generous: in the whole run, synchronous mount tests can hold the
/// test runner's threads for a long while before this test gets one.
@Suite("Control server accept loop")
struct ControlServerAcceptTests {
  @Test("failing accepts (EMFILE) back off instead of spinning, and the server recovers", .timeLimit(.minutes(5)))
  func acceptErrorsDoNotSpin() throws {
    let base = NSTemporaryDirectory() + "appbox-accept-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    try Sys.mkdir(base, 0o700)
    try Sys.mkdir(base + "/backing", 0o755)
    defer { try? FileManager.default.removeItem(atPath: base) }
    let filesystem = try SandboxFilesystem(
      backingDirectory: base + "/backing", configuration: CacheTimeouts(), options: SandboxOptions(),
      driver: NoKernel())
    let socket = base + "/control.sock"

    // Nothing else in this process accepts: a process-wide fault reaches only the server.
    let window = 1.5
    let (calls, failures) = try SyscallFaults.injectEverywhere([.accept: SyscallFault(Errno(rawValue: EMFILE))]) {
      faults in
      try ControlServer(path: socket, filesystem: filesystem, mountpoint: "/nonexistent").start()
      Clock.sleep(seconds: window)
      return (faults.calls(.accept), faults.failures(.accept))
    }
    #expect(failures >= 2, "the loop kept trying")
    // Spinning would make tens of thousands of calls a second; a fixed 50 ms pause 30 in
    // the window; the doubling back-off (50, 100, 200, 400, 800 ms) about 5.
    #expect(calls <= 10, "\(calls) accept calls in \(window) s")

    // The descriptors are back: a request is answered within the longest back-off.
    let started = Clock.monotonic()
    let connection = try UnixSocket.connect(to: socket)
    defer { Sys.close(connection) }
    try UnixSocket.setTimeouts(connection, milliseconds: 5_000)
    UnixSocket.writeAll(connection, Array("status\n".utf8))
    let reply = UnixSocket.readLine(connection).map { String(decoding: $0, as: UTF8.self) }
    #expect(reply?.hasPrefix("{\"ok\":true") == true)
    #expect(Clock.monotonic() - started < ControlServer.maximumBackOff + 2)
  }
}
