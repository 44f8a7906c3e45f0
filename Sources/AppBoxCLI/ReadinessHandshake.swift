import Foundation
import Posix

/// How `appbox mount` hands its background daemon the pipe to report readiness on:
/// descriptor 3, named by an environment variable that the daemon removes at once. It is
/// no command-line option, and a descriptor that is not a pipe is refused.
enum ReadinessHandshake {
  /// The variable the background parent sets for its daemon.
  static let variable = "APPBOX_INTERNAL_READY_FD"
  /// The descriptor the daemon inherits the pipe's write end as.
  static let descriptor: Int32 = 3

  /// The environment entry for the daemon.
  static var environmentEntry: String { "\(variable)=\(descriptor)" }

  /// The inherited readiness pipe when this process is a mount's background daemon, else
  /// nil. Removes the variable.
  static func inherited() throws(CLIError) -> Int32? {
    guard let value = ProcessInfo.processInfo.environment[variable] else { return nil }
    unsetenv(variable)
    let isPipe: Bool
    // EBADF: nothing open there, so no pipe either.
    do { isPipe = try Sys.fstat(descriptor).st_mode & S_IFMT == S_IFIFO } catch { isPipe = false }
    guard Int32(value) == descriptor, isPipe else {
      throw CLIError(.usage, "\(variable) is internal to appbox mount: unset it")
    }
    // libfuse's fusermount3 (a user's mount, auto_unmount) must not inherit it: with
    // auto_unmount it stays, and the waiting `appbox mount` would never see the pipe end.
    ReadinessPipe.keepFromChildren(descriptor)
    return descriptor
  }
}
