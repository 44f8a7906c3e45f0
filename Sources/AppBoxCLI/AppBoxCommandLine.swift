import Foundation

/// The `appbox` command line: dispatches a subcommand and maps errors to exit codes.
public enum AppBoxCommandLine {
  /// AppBox's version.
  public static let version = "0.1.0"

  static let help = """
    appbox \(version): an iOS-style app sandbox on a FUSE mount

    usage: appbox COMMAND [OPTIONS]

    commands:
      mount [--backing DIR] [--foreground] [-o OPTIONS] MOUNTPOINT
                 mount a sandbox (Documents, Library/Application Support, Library/Preferences,
                 Library/Caches, tmp) and return once it is ready
      unmount [--lazy] MOUNTPOINT
                 unmount and wait for the daemon to finish
      lock MOUNTPOINT, unlock MOUNTPOINT
                 change the simulated device's lock state (BFU, UNLOCKED, GRACE, LOCKED)
      status [--json | --descriptors] MOUNTPOINT
                 state, capacity, usage by domain, purgeable bytes, counters
                 (--descriptors: the daemon's open descriptors, JSON)
      purge MOUNTPOINT (--bytes SIZE | --domain caches|tmp --all | --older-than DURATION [--domain D])
                 purge tmp and Caches now
      drop-caches MOUNTPOINT
                 make the kernel forget the mount's idle files (names, attributes, pages),
                 as drop_caches does, for this mount only and without root
      resize MOUNTPOINT --capacity SIZE
                 change the capacity now (shrinking purges tmp, then Caches, down to it)
      pressure MOUNTPOINT --schedule FILE
                 change the capacity over time: lines 'TIME CAPACITY' (e.g. '10s 64M', '1m 50%')
      events [--follow] [--mount-id ID] MOUNTPOINT, events --list MOUNTPOINT
                 refusals, state changes, purges, capacity changes, purge costs, usage
                 samples as JSON Lines: the current mount's log, or an earlier mount's
      report (MOUNTPOINT [--mount-id ID] | --events FILE) [--output FILE.html]
                 summarise an event log; --output: an HTML page with charts
      experiment --capacities SIZE,SIZE,... [--runs N] [--template DIR] [--output FILE.html] -- PROGRAM [ARGS...]
                 run a program once per capacity in fresh sandboxes; compare purge costs
      protect PATH --class CLASS
                 set a file's Data Protection class
      backup MOUNT --to DIR [--bundle-id ID] [--json], backup --dry-run MOUNT
                 write what a device backup holds as an unencrypted iOS backup; its size report
      restore BACKUP --backing DIR [--bundle-id ID]
                 restore an app's backup (AppBox's or a device's) into a new backing directory
      run [MOUNT OPTIONS] [MOUNTPOINT] [--app BUNDLE-ID] -- PROGRAM [ARGUMENTS...]
                 run a program inside a sandbox (mounted for it, or already mounted);
                 on a device mount, as one of its apps
      app install|remove|list MOUNTPOINT ...
                 the apps and App Groups of a device mount (appbox mount --device)

    run appbox mount --help for the mount options

    mount -t fuse.appbox BACKING MOUNTPOINT -o OPTIONS (and /etc/fstab) call
      appbox BACKING MOUNTPOINT -o OPTIONS: each mount option as -o name=value
      (capacity=2G, grace=10s, default-protection=none, unlocked, …) beside FUSE options

    options: --help, --version

    exit codes: 0 ok, 1 failed, 64 usage, 65 bad value, 66 missing or unusable path,
                69 FUSE unavailable, 71 system error, 75 busy or not mounted, 77 not permitted
    """

  /// Runs the command line and exits.
  public static func main() -> Never {
    let arguments = Array(CommandLine.arguments.dropFirst())
    do {
      exit(try run(arguments).rawValue)
    } catch {
      if error.code == .success {
        print(error.message)
      } else {
        FileHandle.standardError.write(Data("appbox: \(error.message)\n".utf8))
      }
      exit(error.code.rawValue)
    }
  }

  /// Whether `path` is an existing directory.
  private static func isDirectory(_ path: String) -> Bool {
    var isDirectory: ObjCBool = false
    return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
  }

  /// Runs one command line. A usage error ends with where to read more (`see appbox
  /// mount --help`), never with the whole usage text.
  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    guard let command = arguments.first else { throw CLIError(.usage, help) }
    let fstab = FstabArguments.matches(arguments, isDirectory: isDirectory)
    do {
      return try dispatch(command, Array(arguments.dropFirst()), whole: arguments, fstab: fstab)
    } catch {
      guard error.code == .usage, let name = fstab ? "mount" : subcommands.first(where: { $0 == command }) else {
        throw error
      }
      throw CLIError(.usage, "\(error.message)\nsee appbox \(name) --help")
    }
  }

  /// The subcommands, as `appbox COMMAND --help` names them.
  static let subcommands = [
    "mount", "unmount", "umount", "lock", "unlock", "status", "purge", "drop-caches", "events", "resize", "pressure",
    "report", "experiment", "protect", "backup", "restore", "run", "app",
  ]

  private static func dispatch(_ command: String, _ rest: [String], whole arguments: [String], fstab: Bool)
    throws(CLIError) -> ExitCode
  {
    switch command {
    case "mount": return try MountCommand.run(rest)
    case "unmount", "umount": return try UnmountCommand.run(rest)
    case "lock", "unlock": return try ControlCommands.lockOrUnlock(command, rest)
    case "status": return try ControlCommands.status(rest)
    case "purge": return try ControlCommands.purge(rest)
    case "drop-caches": return try DropCachesCommand.run(rest)
    case "events": return try ControlCommands.events(rest)
    case "resize": return try PressureCommands.resize(rest)
    case "pressure": return try PressureCommands.pressure(rest)
    case "report": return try ReportCommand.run(rest)
    case "experiment": return try ExperimentCommand.run(rest)
    case "protect": return try ControlCommands.protect(rest)
    case "backup": return try BackupCommand.run(rest)
    case "restore": return try RestoreCommand.run(rest)
    case "run": try RunCommand.run(rest)
    case "app": return try AppCommand.run(rest)
    case "--help", "-h", "help":
      print(help)
      return .success
    case "--version", "version":
      print("appbox \(version)")
      return .success
    default:
      if fstab { return try MountCommand.run(try FstabArguments.mountArguments(arguments)) }
      throw CLIError(.usage, "unknown command \(command); run appbox --help")
    }
  }
}
