/// Why a backup or a restore did not happen: what is wrong and what to do, and what kind
/// of failure it is (the command line maps kinds to its exit codes, docs/reference.md).
/// Whatever the kind, nothing was left half-made.
public struct BackupError: Error, Equatable, CustomStringConvertible {
  /// The kinds of failure.
  public enum Kind: Sendable, Equatable {
    /// A command was asked something it cannot mean (an empty path).
    case usage
    /// The input is malformed, hostile or inconsistent (a backup, a record), or a value
    /// does not fit it (a capacity too small for the backup).
    case badData
    /// A path is missing, not a directory, not empty, or cannot be used.
    case unusablePath
    /// Not the caller's to read: another user's sandbox whose backing directory is not
    /// theirs, or is reached through a symlink.
    case notPermitted
    /// A system call failed, or the target's filesystem has not the room.
    case system
  }

  /// What kind of failure.
  public let kind: Kind
  /// What happened and what to do.
  public let message: String

  /// An error of `kind`.
  public init(_ kind: Kind, _ message: String) {
    self.kind = kind
    self.message = message
  }

  public var description: String { message }

  /// The same error with a sentence added.
  func adding(_ note: String?) -> BackupError {
    guard let note else { return self }
    return BackupError(kind, message + "; " + note)
  }
}
