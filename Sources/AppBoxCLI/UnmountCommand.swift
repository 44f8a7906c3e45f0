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
        if argument.hasPrefix("-") { throw CLIError(.usage, "unknown option \(argument)") }
        positional.append(argument)
      }
    }
    guard positional.count == 1 else { throw CLIError(.usage, "missing or extra MOUNTPOINT") }
    let mountpoint = try ControlClient.ownedMount(positional[0]).path
    // The daemon to wait for, when it can be found (a mount whose daemon is gone can
    // still be unmounted).
    let pid = (try? ControlClient.target(mountpoint))?.files.daemonPID
    let status = Spawn.run(fusermount, [fusermount, "-u"] + (lazy ? ["-z"] : []) + ["--", mountpoint])
    guard status == 0 else {
      throw CLIError(.busy, "could not unmount \(mountpoint) (in use? close the programs using it, or use --lazy)")
    }
    if let pid { _ = Spawn.waitForExit(pid, milliseconds: 30_000) }  // its teardown
    return .success
  }

  static var fusermount: String {
    // Absent is the meaning: a path that cannot be executed is not the one to run.
    ["/usr/bin/fusermount3", "/bin/fusermount3"].first { (try? Sys.access($0, X_OK)) != nil } ?? "fusermount3"
  }
}
