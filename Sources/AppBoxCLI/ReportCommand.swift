import AppBoxEvents
import AppBoxReport
import Foundation
import Posix

/// `appbox report [MOUNTPOINT [--mount-id ID] | --events FILE] [--output FILE.html]`: a
/// mount's event log (or a saved one) summarised on the terminal and, with `--output`, as
/// a self-contained HTML page with charts.
enum ReportCommand {
  static let usage = """
    usage: appbox report (MOUNTPOINT [--mount-id ID] | --events FILE) [--output FILE.html]

      Summarises an event log: usage against capacity, purges by domain and reason,
      purge cost (re-creations, missed lookups, bytes re-created), refusals, ENOSPC and
      lock states. MOUNTPOINT reads the log of the mount there now; --mount-id ID an
      earlier mount's (appbox events --list MOUNTPOINT lists them); --events FILE a saved
      log (appbox events MOUNT > FILE). --output writes an HTML page (inline SVG, no
      script, no network) beside the summary printed here.
    """

  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    var eventsFile: String?
    var output: String?
    var mountID: String?
    var positional: [String] = []
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
      switch argument {
      case "--events": eventsFile = try reader.value()
      case "--output", "-o": output = try reader.value()
      case "--mount-id": mountID = try reader.value()
      case "--help", "-h": throw CLIError(.success, usage)
      default:
        if argument.hasPrefix("-") && argument != "-" { throw CLIError(.usage, "unknown option \(argument)") }
        positional.append(argument)
      }
    }
    let bytes: [UInt8]
    let source: String
    switch (eventsFile, positional.count) {
    case (let file?, 0) where mountID == nil:
      source = file
      do { bytes = try Sys.readFile(file) } catch {
        throw CLIError(.noInput, "cannot read the event log \(file): \(error)")
      }
    case (nil, 1):
      let logs = try MountLogs.find(positional[0], needsCurrent: mountID == nil)
      let id = mountID ?? logs.current!
      source = (logs.mountpoint ?? positional[0]) + (mountID == nil ? "" : " (mount \(id))")
      bytes = try logs.directory.read(id)
    default:
      throw CLIError(.usage, "give a MOUNTPOINT or --events FILE (one of them)")
    }
    let parsed = EventLogParser.parse(bytes)
    if let newer = parsed.newerVersion {
      throw CLIError(
        .badValue,
        "\(source): the event log's format is version \(newer), newer than this appbox reads "
          + "(\(EventLogFormat.version)): report it with the appbox that wrote it")
    }
    if let output { try write(ReportPage.html(parsed, source: source), to: output) }
    print(ReportSummary(parsed.events).text)
    for note in parsed.notes {
      FileHandle.standardError.write(Data("appbox: \(source): \(note)\n".utf8))
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
