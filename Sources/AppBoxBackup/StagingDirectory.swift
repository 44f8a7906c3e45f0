import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// A private directory beside a command's target, in which a backup or a restore is built
/// and which is renamed onto the target when complete, or removed on failure: nothing
/// half-made is ever left at the target.
///
/// It is made in the target's parent through the descriptor ``TargetDirectory`` holds
/// (no path is resolved again), gets a random name and mode 0700 whatever the umask, and
/// is checked to be a directory of the user's own after it is made (a parent others may
/// write into cannot hand over a directory of theirs); everything inside is reached
/// through its descriptor. After the rename the target is checked to be this very
/// directory: one that another user renamed into its place is reported, not taken for
/// the result.
final class StagingDirectory {
  /// The target's parent directory (the target's descriptor).
  var parentFD: Int32 { target.parentFD }
  /// The staging directory.
  let fd: Int32
  /// The staging directory's name in the parent.
  let name: String
  /// Where the result goes.
  let target: TargetDirectory
  private var settled = false

  /// The staging directory's path (for messages; nothing opens it).
  var path: String { target.parent == "/" ? "/" + name : target.parent + "/" + name }

  /// Checks that `target` is absent or an empty directory, and makes the staging
  /// directory beside it.
  /// - Parameters:
  ///   - purpose: a word for its name (`backup`, `restore`).
  ///   - verb: what the command does, for the message about a target that is not empty
  ///     (`back up`, `restore`).
  /// - Throws: ``BackupError`` `.unusablePath` when the target is not a new or empty directory or
  ///   the staging directory cannot be made; `.system` when it is not the user's own.
  init(for target: TargetDirectory, purpose: String, verb: String) throws(BackupError) {
    self.target = target
    try Self.checkNewOrEmpty(target, verb: verb)
    (name, fd) = try Self.make(in: target.parentFD, for: target, purpose: purpose)
  }

  deinit { Sys.close(fd) }

  /// Renames the staging directory onto the target (replacing it when it is an empty
  /// directory), and checks that the target is now this directory.
  /// - Throws: ``BackupError`` `.unusablePath` when the target is no longer empty or a
  ///   directory; `.system` when the rename fails or what lies at the target afterwards
  ///   is not the staging directory (another user renamed theirs to its name).
  func commit() throws(BackupError) {
    let own: stat
    do throws(Errno) {
      own = try Sys.fstat(fd)
      try Sys.renameat2(parentFD, name, parentFD, target.name, 0)
      settled = true
    } catch  where error == .notEmpty || error == .exists {
      throw BackupError(.unusablePath, "\(target.path) is no longer empty: nothing was written there")
    } catch  where error == .busy {
      throw BackupError(.unusablePath, "\(target.path) is in use (a mountpoint?): give a directory that is not")
    } catch  where error == .notDirectory || error == .isDirectory {
      throw BackupError(.unusablePath, "\(target.path) is no longer a directory: nothing was written there")
    } catch {
      throw BackupError(.system, "cannot rename \(path) to \(target.path): \(error)")
    }
    let placed: stat
    do throws(Errno) { placed = try Sys.fstatat(parentFD, target.name, AT_SYMLINK_NOFOLLOW) } catch {
      throw BackupError(.system, "cannot look at \(target.path) after renaming \(path) to it: \(error)")
    }
    guard placed.st_dev == own.st_dev, placed.st_ino == own.st_ino else {
      throw BackupError(
        .system,
        "\(target.path) is not the directory built: another was renamed to \(name) or to \(target.name) meanwhile, so what lies there is not the result"
      )
    }
  }

  /// Removes the staging directory and everything in it, unless it was committed.
  /// - Returns: nil when nothing is left, else a sentence to add to the error message.
  func discard() -> String? {
    guard !settled else { return nil }
    settled = true
    do throws(Errno) {
      try Directory.removeTree(parentFD, Array(name.utf8CString))
      return nil
    } catch {
      return "\(path) could not be removed (\(error)): remove it by hand"
    }
  }

  /// Checks that `target` is absent or an empty directory, writing nothing.
  /// - Parameter verb: what the command does, for the message (`back up`, `restore`).
  static func checkNewOrEmpty(_ target: TargetDirectory, verb: String) throws(BackupError) {
    let status: stat
    do throws(Errno) {
      status = try Sys.fstatat(target.parentFD, target.name, AT_SYMLINK_NOFOLLOW)
    } catch  where error == .noEntry {
      return
    } catch {
      throw BackupError(.unusablePath, "cannot look at \(target.path): \(error)")
    }
    guard status.st_mode & S_IFMT == S_IFDIR else {
      throw BackupError(.unusablePath, "\(target.path) is not a directory: \(verb) into a new or empty directory")
    }
    var empty = true
    do throws(Errno) {
      let stream = try DirectoryStream(
        fd: try Sys.openat(target.parentFD, target.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
      while empty, let item = try stream.next() {
        empty = isDotOrDotDot(item.name)
      }
    } catch {
      throw BackupError(.unusablePath, "cannot list \(target.path): \(error)")
    }
    guard empty else {
      throw BackupError(.unusablePath, "\(target.path) is not empty: \(verb) into a new or empty directory")
    }
  }

  // MARK: - Making

  private static func make(in parentFD: Int32, for target: TargetDirectory, purpose: String) throws(BackupError) -> (
    String, Int32
  ) {
    // The target's name (shortened: the whole must fit NAME_MAX) tells people whose it is.
    let prefix = "." + String(decoding: target.name.utf8.prefix(200), as: UTF8.self) + ".appbox-\(purpose)-"
    var attempts = 0
    while true {
      attempts += 1
      let name = prefix + String(UInt64.random(in: 0..<(1 << 48)), radix: 16)
      let fd: Int32
      do throws(Errno) {
        try Sys.mkdirat(parentFD, name, 0o700)
      } catch  where error == .exists && attempts < 16 {
        continue
      } catch {
        throw BackupError(.unusablePath, "cannot create \(name) in \(target.parent): \(error)")
      }
      do throws(Errno) {
        fd = try Directory.open(parentFD, name)
      } catch {
        throw BackupError(.system, "cannot open \(name) in \(target.parent), just made: \(error)")
      }
      do throws(Errno) {
        let status = try Sys.fstat(fd)
        guard status.st_uid == Sys.effectiveUID else { throw Errno.notPermitted }
        try Sys.fchmod(fd, 0o700)  // whatever the umask
      } catch {
        Sys.close(fd)
        throw BackupError(.system, "\(name) in \(target.parent) was replaced by another user's directory: \(error)")
      }
      return (name, fd)
    }
  }
}
