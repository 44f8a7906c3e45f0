import AppBoxBackup
import Foundation
import Posix
import SandboxPolicy

/// `appbox restore BACKUP --backing DIR [--bundle-id ID]`.
enum RestoreCommand {
  static let usage = """
    usage: appbox restore BACKUP --backing DIR [--bundle-id ID] [--capacity SIZE]
      restores an app from an unencrypted iOS backup (appbox backup's, or a device's
      from Finder or iTunes) into DIR, a new or empty backing directory: Documents and
      Library with their bytes, modes (without set-user-ID and set-group-ID), times,
      classes and attributes; Caches and tmp empty. Files belong to you. A restore that
      would not fit DIR's filesystem, or SIZE when given (the --capacity you will
      mount it with), is refused before anything is written.
      --bundle-id picks the app when the backup holds several.
      Then: appbox mount --backing DIR MOUNTPOINT
    """

  /// Runs the command.
  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    var target: String?
    var bundleID: String?
    var capacity: Int64?
    var positional: [String] = []
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
      switch argument {
      case "--backing": target = try reader.value()
      case "--bundle-id": bundleID = try reader.value()
      case "--capacity":
        let text = try reader.value()
        do throws(ByteCount.ParseError) { capacity = try ByteCount.parse(text).bytes } catch {
          throw CLIError(.badValue, "--capacity \(text): \(error)")
        }
      case "--help", "-h":
        print(usage)
        return .success
      case let option where option.hasPrefix("-"): throw CLIError(.usage, "unknown option \(option)")
      default: positional.append(argument)
      }
    }
    guard positional.count == 1, !positional[0].isEmpty else {
      throw CLIError(.usage, "give one BACKUP directory")
    }
    guard let target, !target.isEmpty else { throw CLIError(.usage, "say where: --backing DIR") }
    let destination: TargetDirectory
    do throws(BackupError) { destination = try TargetDirectory.resolve(target, option: "--backing") } catch {
      throw CLIError(error)
    }
    let progress = ProgressLine(enabled: Sys.isTerminal(2), verb: "restoring")
    defer { progress.finish() }
    let restorer = BackupRestorer(backup: positional[0], progress: progress.update)
    let database: ManifestDatabase
    let domains: [String]
    do throws(BackupError) { (database, domains) = try restorer.open() } catch { throw CLIError(error) }
    let domain: String
    let listed = domains.compactMap(BackupRules.bundleID(ofDomain:)).joined(separator: ", ")
    if let bundleID {
      guard domains.contains(BackupRules.domain(bundleID: bundleID)) else {
        throw CLIError(
          .badValue,
          "the backup holds no app \(bundleID); it holds: \(listed.isEmpty ? "none" : listed)")
      }
      domain = BackupRules.domain(bundleID: bundleID)
    } else {
      guard domains.count == 1 else {
        throw CLIError(
          domains.isEmpty ? .badValue : .usage,
          domains.isEmpty
            ? "the backup holds no app (no AppDomain-… rows)"
            : "the backup holds several apps; pick one with --bundle-id: \(listed)")
      }
      domain = domains[0]
    }
    let summary: BackupRestorer.Summary
    do throws(BackupError) {
      summary = try restorer.restore(database, domain: domain, into: destination, capacity: capacity)
    } catch {
      throw CLIError(error)
    }
    print(
      "restored \(BackupRules.bundleID(ofDomain: domain) ?? domain): \(summary.files) files (\(ByteCount(summary.bytes).formatted)), "
        + "\(summary.directories) directories, \(summary.symlinks) symlinks into \(target)"
        + (summary.skipped + summary.excluded > 0
          ? "; left out \(summary.skipped) items outside Documents and Library, \(summary.excluded) excluded" : "")
        + (summary.setIDDropped > 0
          ? "; set-user-ID and set-group-ID bits dropped from \(summary.setIDDropped) items (ownership is not restored)"
          : ""))
    return .success
  }
}
