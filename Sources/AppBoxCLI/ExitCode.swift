import AppBoxBackup

/// `appbox`'s exit codes (documented in the README), after BSD's sysexits.
public enum ExitCode: Int32, Sendable {
  /// Success.
  case success = 0
  /// The operation ran and failed (e.g. the daemon reported an error).
  case failure = 1
  /// Bad command line: unknown subcommand, option, or missing argument (`EX_USAGE`).
  case usage = 64
  /// A value is malformed: a size, a duration, a class name (`EX_DATAERR`).
  case badValue = 65
  /// A path is missing, not a directory, or unreadable (`EX_NOINPUT`).
  case noInput = 66
  /// FUSE is not available: no usable `/dev/fuse` (`EX_UNAVAILABLE`).
  case unavailable = 69
  /// The kernel refused the mount, or another system call failed (`EX_OSERR`).
  case osError = 71
  /// The mountpoint is busy (already mounted) or no daemon serves it (`EX_TEMPFAIL`).
  case busy = 75
  /// Not allowed: e.g. controlling a mount another user owns (`EX_NOPERM`).
  case noPermission = 77
}

/// An error the CLI reports as one message and an exit code; nothing was changed.
public struct CLIError: Error, CustomStringConvertible {
  /// What happened and what to do.
  public let message: String
  /// The process's exit code.
  public let code: ExitCode

  /// Creates an error.
  public init(_ code: ExitCode, _ message: String) {
    self.code = code
    self.message = message
  }

  public var description: String { message }
}

extension CLIError {
  /// A backup or restore error with its exit code (docs/reference.md): 64 usage, 65 bad
  /// data, 66 unusable path, 71 system, 77 not the caller's to read.
  init(_ error: BackupError) {
    switch error.kind {
    case .usage: self.init(.usage, error.message)
    case .badData: self.init(.badValue, error.message)
    case .unusablePath: self.init(.noInput, error.message)
    case .system: self.init(.osError, error.message)
    case .notPermitted: self.init(.noPermission, error.message)
    }
  }
}
