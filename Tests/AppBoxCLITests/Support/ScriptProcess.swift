import Foundation
import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// A Python program the test talks to by lines: it hears on its standard input and says
/// on its standard output (whoever of its descendants holds them).
final class ScriptProcess {
  let process: Process
  private let input = Pipe()
  private let output = Pipe()
  private var buffer: [UInt8] = []
  /// Whether ``waitForExit()`` reaped it (or found it reaped).
  private var reaped = false

  init(_ script: String, _ arguments: [String]) throws {
    process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", script] + arguments
    process.standardInput = input
    process.standardOutput = output
    try process.run()
  }

  deinit {
    try? input.fileHandleForWriting.close()
    guard !reaped else { return }
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    waitForExit()
  }

  var pid: pid_t { process.processIdentifier }

  /// Writes `line` and a newline to its standard input.
  func send(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

  /// Closes its standard input.
  func endInput() { try? input.fileHandleForWriting.close() }

  /// The next line it says, without its newline; nil when none comes within `seconds`
  /// (or its output ends).
  func line(seconds: Double = 30) -> String? {
    let fd = output.fileHandleForReading.fileDescriptor
    let deadline = Clock.monotonic() + seconds
    while true {
      if let newline = buffer.firstIndex(of: 0x0A) {
        defer { buffer.removeSubrange(...newline) }
        return String(decoding: buffer[..<newline], as: UTF8.self)
      }
      let remaining = deadline - Clock.monotonic()
      guard remaining > 0 else { return nil }
      var item = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
      guard poll(&item, 1, Int32(remaining * 1000) + 1) > 0 else { continue }
      var chunk = [UInt8](repeating: 0, count: 4096)
      let count = read(fd, &chunk, chunk.count)
      if count <= 0 { return nil }
      buffer += chunk[..<count]
    }
  }

  /// Waits for it to exit (it is reaped when this returns), with a `waitpid` of its own:
  /// Foundation's `waitUntilExit` once never saw such a peer exit in a full run (tests
  /// starting processes on many threads at once), its zombie left unreaped and the test
  /// hung. ECHILD: Foundation's own watch reaped it first.
  func waitForExit() {
    guard !reaped else { return }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    reaped = true
  }
}
