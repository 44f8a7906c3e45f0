import Dispatch
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

/// Appends events as JSON Lines to a file, off the request path (a serial queue), one
/// `write` per line so concurrent readers never see half a line.
final class EventLog: Sendable {
  private let fd: Int32
  private let queue = DispatchQueue(label: "appbox.events")

  /// Opens (creating, mode 0600) the log at `path`; nil path: events are dropped.
  init(path: String?) {
    fd = path.flatMap { try? Sys.openat(AT_FDCWD, $0, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600) } ?? -1
  }

  deinit { if fd >= 0 { Sys.close(fd) } }

  /// Records one JSON object (without its newline). The write holds the log: its
  /// descriptor stays open until every line recorded is written (closed at once, its
  /// number could be another file's by then).
  func record(_ jsonLine: String) {
    guard fd >= 0 else { return }
    queue.async { [self] in
      var line = Array(jsonLine.utf8)
      line.append(0x0A)
      _ = line.withUnsafeBytes { try? Sys.write(fd, $0) }  // a full disk loses the line, not the request
    }
  }

  /// Waits until every recorded event is written.
  func flush() { queue.sync {} }
}
