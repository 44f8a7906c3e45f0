import Foundation
import Posix
import SandboxPolicy

/// A one-line progress display on standard error, when it is a terminal: what the
/// backup and restore engines report, at most five times a second.
final class ProgressLine {
  private let enabled: Bool
  private let verb: String
  private var last: Double = 0
  private var shown = false

  /// A display; `enabled` false makes it silent.
  init(enabled: Bool, verb: String) {
    self.enabled = enabled
    self.verb = verb
  }

  /// Shows the counts (at most five times a second).
  func update(items: Int, bytes: Int64) {
    guard enabled else { return }
    let now = Clock.monotonic()
    guard now - last >= 0.2 else { return }
    last = now
    shown = true
    FileHandle.standardError.write(Data("\r\(verb): \(items) items, \(ByteCount(bytes).formatted)\u{1B}[K".utf8))
  }

  /// Clears the line.
  func finish() {
    guard shown else { return }
    shown = false
    FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
  }
}
