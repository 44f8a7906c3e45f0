import Foundation
import Posix

/// A mount's event log in its runtime directory, opened only if its daemon wrote it.
enum EventLogFile {
  /// Opens the event log of `target` for reading; nil when nothing was recorded yet.
  /// - Throws: 77 when the file is not the daemon's (another owner, not a regular file).
  static func open(_ target: ControlClient.Target) throws(CLIError) -> Int32? {
    let fd: Int32
    do { fd = try Sys.open(target.files.events, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) } catch {
      if error == .noEntry { return nil }
      throw CLIError(.noPermission, "cannot read \(target.files.events): \(error)")
    }
    // The daemon creates its event log; believe no other file.
    guard let st = try? Sys.fstat(fd), st.st_mode & S_IFMT == S_IFREG, st.st_uid == target.owner else {
      Sys.close(fd)
      throw CLIError(.noPermission, "\(target.files.events) is not the event log of \(target.mountpoint)'s daemon")
    }
    return fd
  }

  /// The whole event log of `target` (empty when nothing was recorded yet).
  static func read(_ target: ControlClient.Target) throws(CLIError) -> [UInt8] {
    guard let fd = try open(target) else { return [] }
    defer { Sys.close(fd) }
    do { return try Sys.readToEnd(fd, limit: maximumBytes) } catch {
      throw CLIError(.osError, "cannot read \(target.files.events): \(error)")
    }
  }

  /// The longest event log a report reads.
  static let maximumBytes = 1 << 30
}
