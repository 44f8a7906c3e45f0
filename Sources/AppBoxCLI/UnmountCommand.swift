import Foundation
import Posix

/// `appbox unmount MOUNTPOINT [--lazy]`: unmounts and waits for the daemon to exit.
enum UnmountCommand {
  static let usage = "usage: appbox unmount [--lazy] MOUNTPOINT"

  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    var lazy = false
    var positional: [String] = []
    for argument in arguments {
      switch argument {
      case "--lazy", "-z": lazy = true
      case "--help", "-h": throw CLIError(.success, usage)
      default:
        if argument.hasPrefix("-") { throw CLIError(.usage, "unknown option \(argument)\n\(usage)") }
        positional.append(argument)
      }
    }
    guard positional.count == 1 else { throw CLIError(.usage, "missing or extra MOUNTPOINT\n\(usage)") }
    guard let resolved = realpath(positional[0], nil) else {
      throw CLIError(.noInput, "\(positional[0]) does not exist")
    }
    let mountpoint = String(cString: resolved)
    free(resolved)
    guard let mount = MountTable.mount(at: mountpoint), mount.type.hasPrefix("fuse") else {
      throw CLIError(.busy, "\(mountpoint) is not an AppBox mount")
    }
    let files = try RuntimeDirectory.current().files(for: mountpoint)
    let pid = files.daemonPID
    let status = Spawn.run(fusermount, [fusermount, "-u"] + (lazy ? ["-z"] : []) + ["--", mountpoint])
    guard status == 0 else {
      throw CLIError(.busy, "could not unmount \(mountpoint) (in use? close the programs using it, or use --lazy)")
    }
    if let pid { _ = Spawn.waitForExit(pid, milliseconds: 30_000) }  // its teardown
    return .success
  }

  static var fusermount: String {
    ["/usr/bin/fusermount3", "/bin/fusermount3"].first { access($0, X_OK) == 0 } ?? "fusermount3"
  }
}
