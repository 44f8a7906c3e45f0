import AppBoxBackup
import AppBoxFS
import Foundation
import Posix
import SandboxPolicy

/// `appbox backup MOUNT --to DIR [--bundle-id ID] [--json]` and `appbox backup --dry-run MOUNT`.
enum BackupCommand {
  static let usage = """
    usage: appbox backup MOUNT --to DIR [--bundle-id ID] [--json]
           appbox backup --dry-run MOUNT [--bundle-id ID] [--json]
      writes what a device backup of the app holds (Documents and Library except
      Library/Caches, minus excluded items; never tmp) as an unencrypted iOS backup in
      DIR (new or empty), and prints its size report; --dry-run prints the report alone.
      MOUNT is an AppBox mount, or the backing directory of a sandbox not mounted.
      --bundle-id names the app (default: local.appbox.NAME, NAME the last component of MOUNT)
      A device (appbox mount --device) is backed up whole: a domain per app
      (AppDomain-BUNDLE-ID) and per App Group (AppDomainGroup-GROUP-ID); no --bundle-id.
    """

  /// Runs the command.
  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    var destination: String?
    var bundleID: String?
    var json = false
    var dryRun = false
    var positional: [String] = []
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
      switch argument {
      case "--to": destination = try reader.value()
      case "--bundle-id": bundleID = try reader.value()
      case "--json": json = true
      case "--dry-run": dryRun = true
      case "--help", "-h":
        print(usage)
        return .success
      case let option where option.hasPrefix("-"): throw CLIError(.usage, "unknown option \(option)")
      default: positional.append(argument)
      }
    }
    guard positional.count == 1, !positional[0].isEmpty else { throw CLIError(.usage, "give one MOUNT") }
    guard dryRun == (destination == nil) else {
      throw CLIError(.usage, dryRun ? "--dry-run writes nothing: drop --to" : "say where: --to DIR")
    }
    let mount = positional[0]
    let mountpoint = try resolve(mount)
    let (backing, owner, device) = try backingDirectory(of: mount, resolved: mountpoint)
    if device, let bundleID {
      throw CLIError(.usage, "--bundle-id \(bundleID): a device's backup holds every app; leave --bundle-id out")
    }
    let app = bundleID ?? defaultBundleID(for: mount, resolved: mountpoint)
    guard device || BackupRules.isValidBundleID(app) else {
      throw CLIError(.badValue, "--bundle-id \(app): use letters, digits, '.', '-' and '_' (e.g. com.example.app)")
    }
    var target: TargetDirectory?
    if let destination {
      guard !destination.isEmpty else { throw CLIError(.usage, "say where: --to DIR") }
      let resolved: TargetDirectory
      do throws(BackupError) { resolved = try TargetDirectory.resolve(destination, option: "--to") } catch {
        throw CLIError(error)
      }
      try checkOutside(resolved, of: [backing, mountpoint])
      target = resolved
    }
    let progress = ProgressLine(enabled: Sys.isTerminal(2), verb: dryRun ? "measuring" : "backing up")
    let writer =
      device
      ? BackupWriter(device: backing, owner: owner, dryRun: dryRun, progress: progress.update)
      : BackupWriter(backing: backing, owner: owner, bundleID: app, dryRun: dryRun, progress: progress.update)
    let report: BackupReport
    do throws(BackupError) {
      defer { progress.finish() }
      report = try writer.run(destination: target)
    } catch {
      throw CLIError(error)
    }
    print(json ? report.json(dryRun: dryRun) : report.text(dryRun: dryRun))
    if !report.skipped.isEmpty {
      throw CLIError(.failure, "\(report.skipped.count) files kept changing while copied and are not in the backup")
    }
    if !report.tooDeep.isEmpty {
      throw CLIError(
        .failure,
        "\(report.tooDeep.count) items lie deeper than \(BackupReport.maximumDepth) directories, which a restore does not make, and are not in the backup"
      )
    }
    return .success
  }

  /// `local.appbox.<last component of path>`, with characters a bundle id cannot hold as `-`;
  /// the last component of `resolved` (the path without symlinks) when `path`'s own is
  /// `.` or `..`.
  static func defaultBundleID(for path: String, resolved: String) -> String {
    var name = String(path.split(separator: "/").last ?? "")
    if name.isEmpty || name == "." || name == ".." { name = String(resolved.split(separator: "/").last ?? "") }
    let cleaned = String(
      name.unicodeScalars.map { scalar -> Character in
        scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || scalar == "." || scalar == "-")
          ? Character(scalar) : "-"
      })
    return "local.appbox." + (cleaned.isEmpty || cleaned == "." || cleaned == "/" ? "sandbox" : cleaned)
  }

  /// Refuses a destination inside the sandbox (its mount or backing directory, both
  /// resolved): the backup would walk into itself.
  static func checkOutside(_ destination: TargetDirectory, of roots: [String]) throws(CLIError) {
    let target = destination.path + "/"
    for root in roots where target.hasPrefix(root == "/" ? "/" : root + "/") {
      throw CLIError(
        .noInput, "\(destination.path) is inside the sandbox \(root): back up to a directory outside it")
    }
  }

  /// MOUNT without symlinks, `.` or `..`.
  static func resolve(_ path: String) throws(CLIError) -> String {
    do throws(Errno) {
      return try Sys.realpath(path)
    } catch  where error == .noEntry {
      throw CLIError(.noInput, "\(path) does not exist")
    } catch {
      throw CLIError(.noInput, "\(path): \(error)")
    }
  }

  /// The backing directory behind an AppBox mount (asked of its daemon), or the
  /// directory itself when it is a sandbox's or a device's backing directory that is not
  /// mounted; the sandbox's owner when root backs up another user's mount; and whether it
  /// is a device (the daemon's status says; a device's backing directory has
  /// `Containers/`). A daemon that says wrongly gets a backup that refuses the tree.
  ///
  /// The daemon of another user's mount is that user's program and may name any path
  /// (docs/reference.md, "Trust model of backup and restore"): root does not resolve it,
  /// and the backup reads it with the owner's credentials (`user_id=` and `group_id=` of
  /// the mount table, which the kernel set from the process that mounted), refusing a
  /// path through a symlink or a directory that is not the owner's.
  /// - Parameter mountpoint: `path` resolved.
  static func backingDirectory(of path: String, resolved mountpoint: String) throws(CLIError) -> (
    String, UserCredentials?, device: Bool
  ) {
    if let mount = try MountTable.mount(at: mountpoint), mount.isAppBox {
      let reply = try ControlClient.send("status", to: try ControlClient.target(mountpoint))
      let status = ControlClient.object(reply)["status"] as? [String: Any] ?? [:]
      guard let backing = status["backing"] as? String else {
        throw CLIError(.failure, "the daemon of \(mountpoint) did not say where its backing directory is")
      }
      let device = status["device"] as? Bool ?? false
      // Under --write-cache the kernel may hold writes the backing files do not have yet:
      // the daemon has it write them back (syncfs(2) does not wait for a FUSE daemon).
      if status["writeCache"] is [String: Any] {
        let written = ControlClient.object(
          try ControlClient.send("write-back", to: try ControlClient.target(mountpoint)))
        guard written["ok"] as? Bool == true else {
          throw CLIError(
            .failure,
            "the daemon of \(mountpoint) could not have the kernel write back what it holds: \(written["error"] ?? "no reply")"
          )
        }
      }
      if Sys.effectiveUID == 0, let owner = mount.ownerUID, owner != 0 {
        let gid = mount.ownerGID ?? gid_t(owner)
        return (backing, UserCredentials.of(uid: owner, gid: gid), device)
      }
      return (try resolve(backing), nil, device)
    }
    var isDirectory: ObjCBool = false
    if FileManager.default.fileExists(atPath: mountpoint + "/Documents", isDirectory: &isDirectory),
      isDirectory.boolValue,
      FileManager.default.fileExists(atPath: mountpoint + "/Library", isDirectory: &isDirectory),
      isDirectory.boolValue
    {
      return (mountpoint, nil, false)
    }
    if FileManager.default.fileExists(atPath: mountpoint + "/Containers", isDirectory: &isDirectory),
      isDirectory.boolValue
    {
      return (mountpoint, nil, true)
    }
    throw CLIError(
      .noInput,
      "\(path) is neither an AppBox mount nor a sandbox's backing directory (with Documents and Library, or a device's Containers)"
    )
  }
}
