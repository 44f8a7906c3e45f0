import AppBoxFS
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Progress of long work on standard error, only when it is a terminal: one line rewritten
/// in place, then a final line. Nothing at all when standard error is not a terminal.
final class TerminalProgress: Sendable {
  private let isTerminal = isatty(2) == 1
  /// Whether an unfinished progress line is on screen.
  private let showing = Atomic<Bool>(false)

  /// Shows `text` in place of the previous progress line.
  func update(_ text: String) {
    guard isTerminal else { return }
    write("\r\u{1B}[K" + text)
    showing.store(true, ordering: .relaxed)
  }

  /// Replaces the progress line with the final line `text`.
  func finish(_ text: String) {
    guard isTerminal else { return }
    write("\r\u{1B}[K" + text + "\n")
    showing.store(false, ordering: .relaxed)
  }

  /// Ends an unfinished progress line, so that what is printed next starts on its own.
  func end() {
    guard showing.exchange(false, ordering: .relaxed) else { return }
    write("\n")
  }

  private func write(_ text: String) {
    _ = Array(text.utf8).withUnsafeBytes { try? Sys.write(2, $0) }
  }
}

/// Turns the mount-time index's reports into lines for people, paced: the first after half
/// a second (a small sandbox says nothing), then at most four a second, and a final line
/// only when progress was shown.
final class IndexProgressLines: Sendable {
  private let start = Clock.monotonic()
  /// When the last line was shown.
  private let last = Mutex<Double?>(nil)
  private let show: @Sendable (_ line: String, _ isFinal: Bool) -> Void

  /// Lines go to `show`.
  init(_ show: @escaping @Sendable (_ line: String, _ isFinal: Bool) -> Void) { self.show = show }

  /// Takes one report of the index.
  func report(_ progress: IndexProgress) {
    let now = Clock.monotonic()
    let counted = "\(Self.grouped(progress.entries)) entries, \(ByteCount(progress.bytes).formatted)"
    let due = last.withLock { last -> Bool in
      if progress.isComplete { return last != nil }
      guard now - start >= 0.5, now - (last ?? 0) >= 0.25 else { return false }
      last = now
      return true
    }
    guard due else { return }
    if progress.isComplete {
      show("appbox: indexed the sandbox: \(counted) in \(Self.seconds(now - start)) s", true)
    } else {
      show("appbox: indexing the sandbox: \(counted)…", false)
    }
  }

  /// `1234567` as `1,234,567`.
  static func grouped(_ value: Int) -> String {
    var digits = Array(String(value))
    var index = digits.count - 3
    while index > 0 {
      digits.insert(",", at: index)
      index -= 3
    }
    return String(digits)
  }

  private static func seconds(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
  }
}
