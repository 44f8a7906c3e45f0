import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// A private directory beside a command's target, in which a backup or a restore is built
/// and which is renamed onto the target when complete, or removed on failure: nothing
/// half-made is ever left at the target.
///
/// It gets a random name and mode 0700 whatever the umask, and is checked to be a
/// directory of the user's own after it is made (a parent others may write into cannot
/// hand over a directory of theirs); everything inside is reached through its descriptor.
final class StagingDirectory {
  /// The target's parent directory.
  let parentFD: Int32
  /// The staging directory.
  let fd: Int32
  /// The staging directory's name in the parent.
  let name: String
  /// Where the result goes.
  let target: DirectoryArgument
  private var settled = false

  /// The staging directory's path (for messages, and for SQLite, which opens by path).
  var path: String { target.parent == "/" ? "/" + name : target.parent + "/" + name }

  /// Checks that `target` is absent or an empty directory, and makes the staging
  /// directory beside it.
  /// - Parameters:
  ///   - purpose: a word for its name (`backup`, `restore`).
  ///   - verb: what the command does, for the message about a target that is not empty
  ///     (`back up`, `restore`).
  /// - Throws: ``CLIError`` `.noInput` when the target is not a new or empty directory or
  ///   the staging directory cannot be made; `.osError` when it is not the user's own.
  init(for target: DirectoryArgument, purpose: String, verb: String) throws(CLIError) {
    self.target = target
    do throws(Errno) {
      parentFD = try Sys.openat(AT_FDCWD, target.parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    } catch {
      throw CLIError(.noInput, "cannot open \(target.parent): \(error)")
    }
    do throws(CLIError) {
      try Self.checkNewOrEmpty(parentFD, target, verb: verb)
      (name, fd) = try Self.make(in: parentFD, for: target, purpose: purpose)
    } catch {
      Sys.close(parentFD)
      throw error
    }
  }

  deinit {
    Sys.close(fd)
    Sys.close(parentFD)
  }

  /// Renames the staging directory onto the target (replacing it when it is an empty
  /// directory).
  func commit() throws(CLIError) {
    do throws(Errno) {
      try Sys.renameat2(parentFD, name, parentFD, target.name, 0)
      settled = true
    } catch  where error == .notEmpty || error == .exists {
      throw CLIError(.noInput, "\(target.path) is no longer empty: nothing was written there")
    } catch  where error == .busy {
      throw CLIError(.noInput, "\(target.path) is in use (a mountpoint?): give a directory that is not")
    } catch  where error == .notDirectory || error == .isDirectory {
      throw CLIError(.noInput, "\(target.path) is no longer a directory: nothing was written there")
    } catch {
      throw CLIError(.osError, "cannot rename \(path) to \(target.path): \(error)")
    }
  }

  /// Removes the staging directory and everything in it, unless it was committed.
  /// - Returns: nil when nothing is left, else a sentence to add to the error message.
  func discard() -> String? {
    guard !settled else { return nil }
    settled = true
    do throws(Errno) {
      try Self.removeTree(parentFD, Array(name.utf8CString))
      return nil
    } catch {
      return "\(path) could not be removed (\(error)): remove it by hand"
    }
  }

  /// Checks that `target` is absent or an empty directory, writing nothing.
  /// - Parameter verb: what the command does, for the message (`back up`, `restore`).
  static func checkNewOrEmpty(_ target: DirectoryArgument, verb: String) throws(CLIError) {
    let parentFD: Int32
    do throws(Errno) {
      parentFD = try Sys.openat(AT_FDCWD, target.parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    } catch {
      throw CLIError(.noInput, "cannot open \(target.parent): \(error)")
    }
    defer { Sys.close(parentFD) }
    try checkNewOrEmpty(parentFD, target, verb: verb)
  }

  // MARK: - Making and removing

  private static func checkNewOrEmpty(_ parentFD: Int32, _ target: DirectoryArgument, verb: String) throws(CLIError) {
    let status: stat
    do throws(Errno) {
      status = try Sys.fstatat(parentFD, target.name, AT_SYMLINK_NOFOLLOW)
    } catch  where error == .noEntry {
      return
    } catch {
      throw CLIError(.noInput, "cannot look at \(target.path): \(error)")
    }
    guard status.st_mode & S_IFMT == S_IFDIR else {
      throw CLIError(.noInput, "\(target.path) is not a directory: \(verb) into a new or empty directory")
    }
    var empty = true
    do throws(Errno) {
      let stream = try DirectoryStream(
        fd: try Sys.openat(parentFD, target.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
      while empty, let item = try stream.next() {
        empty = isDotOrDotDot(item.name)
      }
    } catch {
      throw CLIError(.noInput, "cannot list \(target.path): \(error)")
    }
    guard empty else {
      throw CLIError(.noInput, "\(target.path) is not empty: \(verb) into a new or empty directory")
    }
  }

  private static func make(in parentFD: Int32, for target: DirectoryArgument, purpose: String) throws(CLIError) -> (
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
        throw CLIError(.noInput, "cannot create \(name) in \(target.parent): \(error)")
      }
      do throws(Errno) {
        fd = try Sys.openat(parentFD, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
      } catch {
        throw CLIError(.osError, "cannot open \(name) in \(target.parent), just made: \(error)")
      }
      do throws(Errno) {
        let status = try Sys.fstat(fd)
        guard status.st_uid == Sys.effectiveUID else { throw Errno.notPermitted }
        try Sys.fchmod(fd, 0o700)  // whatever the umask
      } catch {
        Sys.close(fd)
        throw CLIError(.osError, "\(name) in \(target.parent) was replaced by another user's directory: \(error)")
      }
      return (name, fd)
    }
  }

  /// Removes `name` in `directoryFD` and, for a directory, everything below it, without
  /// following symlinks (a directory made unwritable on the way is made writable first),
  /// with a stack of open directories rather than recursion.
  static func removeTree(_ directoryFD: Int32, _ name: [CChar]) throws(Errno) {
    var stack: [(stream: DirectoryStream, parentFD: Int32, name: [CChar])] = []
    var next: (fd: Int32, name: [CChar])? = (directoryFD, name)
    while true {
      if let (fd, name) = next {
        next = nil
        let status = try Sys.fstatat(fd, name, AT_SYMLINK_NOFOLLOW)
        if status.st_mode & S_IFMT == S_IFDIR {
          let stream = try DirectoryStream(
            fd: try Sys.openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
          if status.st_mode & 0o700 != 0o700 { try Sys.fchmod(stream.fd, 0o700) }
          stack.append((stream, fd, name))
        } else {
          try Sys.unlinkat(fd, name, 0)
        }
      }
      guard let top = stack.last else { return }
      guard let item = try top.stream.next() else {
        // Empty now (entries are removed as they are read, so the listing ends).
        stack.removeLast()
        try Sys.unlinkat(top.parentFD, top.name, AT_REMOVEDIR)
        continue
      }
      if !isDotOrDotDot(item.name) {
        next = (top.stream.fd, Array(UnsafeBufferPointer(start: item.name, count: strlen(item.name) + 1)))
      }
    }
  }
}

/// Whether a directory entry's name is `.` or `..`.
func isDotOrDotDot(_ name: UnsafePointer<CChar>) -> Bool {
  name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0))
}
