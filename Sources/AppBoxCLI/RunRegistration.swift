import Foundation
import Posix

/// A run of `appbox run`, registered with the daemon of its mount (``DeviceControlGate``)
/// by the run's keeper (``RunKeeper``), so that the daemon refuses device changes from the
/// program's tree unless the run allows them.
struct RunRegistration {
  /// The mount's daemon.
  let target: ControlClient.Target

  /// Registers this process as a run on the mount at `mountpoint`. Nil when the caller may
  /// not control that mount (another user's), or when a mount this run reuses has no
  /// control socket in any runtime directory here (a sidecar's, served from another
  /// container): then the program, running as the caller here, cannot reach its daemon
  /// either.
  /// - Throws: when the daemon cannot be reached or refuses (the program must not run
  ///   without the barrier).
  static func register(mountpoint: String, mountedHere: Bool, allowsControl: Bool) throws(CLIError)
    -> RunRegistration?
  {
    let target: ControlClient.Target
    do throws(CLIError) { target = try ControlClient.target(mountpoint) } catch {
      if error.code == .noPermission { return nil }
      if error.code == .busy, !mountedHere {
        FileHandle.standardError.write(
          Data("appbox: \(error.message): the program runs without device control, as from here\n".utf8))
        return nil
      }
      throw CLIError(error.code, "\(error.message); the program did not run")
    }
    do throws(CLIError) {
      _ = try ControlClient.send("run \(allowsControl ? "allow" : "deny")", to: target)
    } catch {
      throw CLIError(
        error.code,
        "cannot register the run with the daemon of \(mountpoint): \(error.message); the program did not run")
    }
    return RunRegistration(target: target)
  }
}
