import AppBoxReport
import Foundation
import Posix

/// `appbox report [MOUNTPOINT | --events FILE] [--output FILE.html]`: a mount's event log
/// (or a saved one) summarised on the terminal and, with `--output`, as a self-contained
/// HTML page with charts.
enum ReportCommand {
  static let usage = """
    usage: appbox report (MOUNTPOINT | --events FILE) [--output FILE.html]

      Summarises an event log: usage against capacity, purges by domain and reason,
      purge cost (re-creations, missed lookups, bytes re-created), refusals, ENOSPC and
      lock states. MOUNTPOINT reads the live mount's log; --events FILE a saved one
      (appbox events MOUNT > FILE). --output writes an HTML page (inline SVG, no script,
      no network) beside the summary printed here.
    """

  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    var eventsFile: String?
    var output: String?
    var positional: [String] = []
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
      switch argument {
      case "--events": eventsFile = try reader.value()
      case "--output", "-o": output = try reader.value()
      case "--help", "-h": throw CLIError(.success, usage)
      default:
        if argument.hasPrefix("-") && argument != "-" { throw CLIError(.usage, "unknown option \(argument)") }
        positional.append(argument)
      }
    }
    let bytes: [UInt8]
    let source: String
    switch (eventsFile, positional.count) {
    case (let file?, 0):
      source = file
      do { bytes = try Sys.readFile(file) } catch {
        throw CLIError(.noInput, "cannot read the event log \(file): \(error)")
      }
    case (nil, 1):
      let target = try ControlClient.target(positional[0])
      source = target.mountpoint
      bytes = try EventLogFile.read(target)
    default:
      throw CLIError(.usage, "give a MOUNTPOINT or --events FILE (one of them)")
    }
    let parsed = EventLogParser.parse(String(decoding: bytes, as: UTF8.self))
    if let output { try write(ReportPage.html(parsed, source: source), to: output) }
    print(ReportSummary(parsed.events).text)
    if parsed.malformedLines > 0 {
      FileHandle.standardError.write(
        Data("appbox: \(source): \(parsed.malformedLines) malformed lines skipped\n".utf8))
    }
    if let output { print("report: \(output)") }
    return .success
  }

  /// Writes a page, replacing the file whole (readers never see half of it).
  static func write(_ page: String, to path: String) throws(CLIError) {
    do { try Sys.replaceFile(path, with: Array(page.utf8), mode: 0o644) } catch {
      throw CLIError(.noInput, "cannot write \(path): \(error)")
    }
  }
}
