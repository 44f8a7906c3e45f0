import AppBoxBackup
import Foundation
import Posix
import SandboxPolicy

/// `appbox restore BACKUP --backing DIR [--bundle-id ID]`.
enum RestoreCommand {
  static let usage = """
    usage: appbox restore BACKUP --backing DIR [--device] [--bundle-id ID] [--capacity SIZE]
      restores an app from an unencrypted iOS backup (appbox backup's, or a device's
      from Finder or iTunes) into DIR, a new or empty backing directory: Documents and
      Library with their bytes, modes (without set-user-ID and set-group-ID), times,
      classes and attributes; Caches and tmp empty. Files belong to you. A restore that
      would not fit DIR's filesystem, or SIZE when given (the --capacity you will
      mount it with), is refused before anything is written.
      --bundle-id picks the app when the backup holds several.
      Then: appbox mount --backing DIR MOUNTPOINT
      --device restores into DIR as a device's backing directory: every app of the backup
      (or the --bundle-id one) in Containers/Data/Application/, and their App Groups
      (AppDomainGroup-…, as Manifest.plist names their members) in
      Containers/Shared/AppGroup/. Then: appbox mount --device --backing DIR MOUNTPOINT
    """

  /// Runs the command.
  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    var target: String?
    var bundleID: String?
    var capacity: Int64?
    var device = false
    var positional: [String] = []
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
      switch argument {
      case "--backing": target = try reader.value()
      case "--bundle-id": bundleID = try reader.value()
      case "--device": device = true
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
    if device {
      return try restoreDevice(
        restorer, database, bundleID: bundleID, into: destination, capacity: capacity, target: target)
    }
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

  /// `--device`: every app (or `bundleID`'s) and the groups they are members of, into a
  /// device's backing directory.
  static func restoreDevice(
    _ restorer: BackupRestorer, _ database: ManifestDatabase, bundleID: String?, into destination: TargetDirectory,
    capacity: Int64?, target: String
  ) throws(CLIError) -> ExitCode {
    let found: (apps: [String], groups: [String], members: [String: [String]])
    do throws(BackupError) { found = try restorer.deviceDomains(database) } catch { throw CLIError(error) }
    var apps = found.apps
    if let bundleID {
      guard apps.contains(bundleID) else {
        throw CLIError(
          .badValue,
          "the backup holds no app \(bundleID); it holds: \(apps.isEmpty ? "none" : apps.joined(separator: ", "))")
      }
      apps = [bundleID]
    }
    guard !apps.isEmpty else { throw CLIError(.badValue, "the backup holds no app (no AppDomain-… rows)") }
    var containers: [BackupRestorer.DeviceContainer] = []
    var groups: Set<String> = []
    for app in apps {
      let id = try AppCommand.identifier(app, what: "the backup's app")
      let named = try (found.members[app] ?? []).map { (name) throws(CLIError) in
        try AppCommand.identifier(name, what: "\(app)'s group")
      }
      containers.append(.init(kind: .app, id: id, domain: BackupRules.domain(bundleID: app), groups: named))
      groups.formUnion(named.map(\.name))
    }
    // A group's data comes back when one of its members does; one the backup has but no
    // restored app names (a device's own backup does not say who its members are) cannot.
    for group in found.groups where groups.contains(group) {
      containers.append(
        .init(
          kind: .group, id: try AppCommand.identifier(group, what: "the backup's group"),
          domain: BackupRules.groupDomain(groupID: group)))
    }
    let leftOut = found.groups.filter { !groups.contains($0) }
    let summary: BackupRestorer.Summary
    do throws(BackupError) {
      summary = try restorer.restoreDevice(database, containers: containers, into: destination, capacity: capacity)
    } catch {
      throw CLIError(error)
    }
    let restoredGroups = containers.filter { $0.kind == .group }.map(\.id.name)
    print(
      "restored a device into \(target): \(apps.count) app\(apps.count == 1 ? "" : "s") (\(apps.joined(separator: ", ")))"
        + (restoredGroups.isEmpty ? "" : ", groups \(restoredGroups.joined(separator: ", "))")
        + "; \(summary.files) files (\(ByteCount(summary.bytes).formatted)), \(summary.directories) directories, \(summary.symlinks) symlinks"
        + (summary.skipped + summary.excluded > 0
          ? "; left out \(summary.skipped) items outside what a backup holds, \(summary.excluded) excluded" : "")
        + (leftOut.isEmpty
          ? "" : "; not restored: \(leftOut.joined(separator: ", ")) (no restored app is a member, as the backup says)")
        + "\nthen: appbox mount --device --backing \(target) MOUNTPOINT")
    return .success
  }
}
