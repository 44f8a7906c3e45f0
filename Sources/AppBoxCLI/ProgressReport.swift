import AppBoxFS
import Foundation
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Progress of long work on standard error, only when it is a terminal: one line rewritten
/// in place, then a final line. Nothing at all when standard error is not a terminal.
final class TerminalProgress: Sendable {
  /// Whether standard error is a terminal.
  let isTerminal = Sys.isTerminal(2)
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

  /// Erases an unfinished progress line, for a final line printed elsewhere (standard
  /// output) to take its place.
  func clear() {
    guard showing.exchange(false, ordering: .relaxed) else { return }
    write("\r\u{1B}[K")
  }

  /// Ends an unfinished progress line, so that what is printed next starts on its own.
  func end() {
    guard showing.exchange(false, ordering: .relaxed) else { return }
    write("\n")
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

  private func write(_ text: String) {
    // Absent is the meaning: progress on stderr is a display; a failed write has nowhere to go.
    _ = Array(text.utf8).withUnsafeBytes { try? Sys.write(2, $0) }
  }
}

/// Paces reports of long work: the first after half a second (quick work says nothing),
/// then at most four a second; a final one only when progress was shown.
final class ProgressPacer: Sendable {
  /// Seconds before the first report: half a second, or `$APPBOX_PROGRESS_AFTER` (seconds,
  /// for tests, whose machines index faster or slower than a person waits).
  static let firstReportAfter: Double = {
    guard let text = ProcessInfo.processInfo.environment["APPBOX_PROGRESS_AFTER"], let seconds = Double(text),
      seconds.isFinite, seconds >= 0
    else { return 0.5 }
    return seconds
  }()
  private let start = Clock.monotonic()
  /// When the last report was made.
  private let last = Mutex<Double?>(nil)

  /// Seconds since the work started.
  var elapsed: Double { Clock.monotonic() - start }

  /// Whether to report now (`isFinal`: the work is done).
  func due(isFinal: Bool = false) -> Bool {
    let now = Clock.monotonic()
    return last.withLock { last in
      if isFinal { return last != nil }
      guard now - start >= Self.firstReportAfter, now - (last ?? 0) >= 0.25 else { return false }
      last = now
      return true
    }
  }
}

/// Turns the mount-time index's reports into paced lines for people.
final class IndexProgressLines: Sendable {
  private let pacer = ProgressPacer()
  private let show: @Sendable (_ line: String, _ isFinal: Bool) -> Void

  /// Lines go to `show`.
  init(_ show: @escaping @Sendable (_ line: String, _ isFinal: Bool) -> Void) { self.show = show }

  /// Takes one report of the index.
  func report(_ progress: IndexProgress) {
    guard pacer.due(isFinal: progress.isComplete) else { return }
    let counted = "\(TerminalProgress.grouped(progress.entries)) entries, \(ByteCount(progress.bytes).formatted)"
    if progress.isComplete {
      show("appbox: indexed the sandbox: \(counted) in \(Self.seconds(pacer.elapsed)) s", true)
    } else {
      show("appbox: indexing the sandbox: \(counted)…", false)
    }
  }

  private static func seconds(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
  }
}
