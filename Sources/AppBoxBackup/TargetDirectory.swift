import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// A directory named on the command line that a command creates, or fills when it is an
/// empty one (`backup --to`, `restore --backing`): its parent, held open from the moment
/// the argument is resolved, and its own name in it.
///
/// Resolved once, from the argument's bytes, without Foundation's path functions: `.`,
/// `./`, `dir/..`, trailing slashes and a symlink to a directory all name the directory a
/// shell user means, and a path that names nothing a command could create gets a clear
/// error (``BackupError`` `.usage` or `.unusablePath`), never a crash. Everything later
/// (the check that the target is new or empty, the staging directory, the rename into
/// place, the free space) works relative to the parent's descriptor: a parent swapped for
/// a symlink while a restore checks its backup changes nothing about where it goes.
public final class TargetDirectory: Sendable {
  /// The parent directory's path when it was resolved: absolute, without symlinks, `.` or
  /// `..` (for messages; nothing opens it again).
  public let parent: String
  /// The directory's own name: one component, never empty, `.` or `..`, at most 255 bytes.
  public let name: String
  /// Whether the directory existed when the argument was resolved.
  public let existed: Bool
  /// The parent directory (`O_PATH`), open for this value's life.
  let parentFD: Int32

  /// The directory's absolute path (for messages).
  public var path: String { parent == "/" ? "/" + name : parent + "/" + name }

  /// The longest name a directory entry may have (`NAME_MAX`).
  static let nameMax = 255

  private init(parent: String, name: String, existed: Bool, parentFD: Int32) {
    self.parent = parent
    self.name = name
    self.existed = existed
    self.parentFD = parentFD
  }

  deinit { Sys.close(parentFD) }

  /// Resolves `argument`, the value of `option` (for messages).
  /// - Throws: ``BackupError`` `.usage` for an empty argument; `.unusablePath` for the root
  ///   directory, an existing item that is not a directory, a dangling symlink, a missing
  ///   parent, a name or path too long, a path that cannot be looked up, or one that
  ///   moved while it was.
  public static func resolve(_ argument: String, option: String) throws(BackupError) -> TargetDirectory {
    guard !argument.isEmpty else { throw BackupError(.usage, "\(option) needs a directory, not an empty name") }
    guard !argument.utf8.contains(0) else { throw BackupError(.usage, "\(option): a path cannot hold a NUL byte") }
    guard argument.utf8.count < Int(PATH_MAX) else {
      throw BackupError(
        .unusablePath, "\(option) \(argument.prefix(64))…: the path is too long (at most \(PATH_MAX - 1) bytes)")
    }
    let directory: Int32
    do throws(Errno) {
      // Symlinks followed, as the user who typed the path means them.
      directory = try Sys.open(argument, Linux.openPath | O_DIRECTORY | O_CLOEXEC)
    } catch  where error == .noEntry {
      return try resolveMissing(argument, option: option)
    } catch  where error == .notDirectory {
      // The argument itself, or a component on the way, is something else.
      let isDirectoryPath: Bool
      do throws(Errno) { isDirectoryPath = try Sys.statPath(argument).st_mode & S_IFMT != S_IFDIR } catch {
        throw lookupError(argument, option: option, error)
      }
      guard !isDirectoryPath else {
        throw BackupError(.unusablePath, "\(option) \(argument) is not a directory: give a new or empty directory")
      }
      throw lookupError(argument, option: option, error)
    } catch {
      throw lookupError(argument, option: option, error)
    }
    defer { Sys.close(directory) }
    let resolved: String
    do throws(Errno) { resolved = String(decoding: try Sys.path(of: directory), as: UTF8.self) } catch {
      throw lookupError(argument, option: option, error)
    }
    guard resolved != "/" else {
      throw BackupError(.unusablePath, "\(option) \(argument) is the root directory: give a new or empty directory")
    }
    let (parent, name) = split(resolved)
    let moved = BackupError(
      .unusablePath, "\(option) \(argument) moved or was removed while it was looked up: try again")
    guard parent.hasPrefix("/") else { throw moved }
    let parentFD: Int32
    do throws(Errno) { parentFD = try Sys.openat(directory, "..", Linux.openPath | O_DIRECTORY | O_CLOEXEC) } catch {
      throw lookupError(argument, option: option, error)
    }
    // The name the kernel gave must lead from that parent to this very directory (not to
    // one renamed there meanwhile, nor to a removed directory's "NAME (deleted)").
    do throws(Errno) {
      let own = try Sys.fstat(directory)
      let found = try Sys.fstatat(parentFD, name, AT_SYMLINK_NOFOLLOW)
      guard found.st_dev == own.st_dev, found.st_ino == own.st_ino else { throw Errno.noEntry }
    } catch {
      Sys.close(parentFD)
      throw error == .noEntry ? moved : lookupError(argument, option: option, error)
    }
    return TargetDirectory(parent: parent, name: name, existed: true, parentFD: parentFD)
  }

  /// A directory that does not exist yet: its parent must.
  private static func resolveMissing(_ argument: String, option: String) throws(BackupError) -> TargetDirectory {
    // Opening found nothing: whatever lstat still finds is a symlink to nothing.
    let dangling: Bool
    do throws(Errno) {
      _ = try Sys.lstatPath(argument)
      dangling = true
    } catch {
      dangling = false
    }
    guard !dangling else {
      throw BackupError(.unusablePath, "\(option) \(argument) is a symlink to nothing: give a new or empty directory")
    }
    var trimmed = Substring(argument)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    let (parentPart, name) = split(String(trimmed))
    guard name != ".", name != ".." else {
      throw BackupError(.unusablePath, "\(option) \(argument): \(parentPart) does not exist")
    }
    guard name.utf8.count <= nameMax else {
      throw BackupError(.unusablePath, "\(option) \(argument): the name is too long (at most \(nameMax) bytes)")
    }
    let parentFD: Int32
    do throws(Errno) {
      parentFD = try Sys.open(parentPart, Linux.openPath | O_DIRECTORY | O_CLOEXEC)
    } catch  where error == .noEntry {
      throw BackupError(.unusablePath, "\(option) \(argument): its parent directory \(parentPart) does not exist")
    } catch {
      throw lookupError(argument, option: option, error)
    }
    let parent: String
    do throws(Errno) { parent = String(decoding: try Sys.path(of: parentFD), as: UTF8.self) } catch {
      Sys.close(parentFD)
      throw lookupError(argument, option: option, error)
    }
    return TargetDirectory(parent: parent, name: name, existed: false, parentFD: parentFD)
  }

  /// The parent and last component of `path` (a path without a slash has the parent `.`).
  private static func split(_ path: String) -> (String, String) {
    let bytes = Array(path.utf8)
    guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return (".", path) }
    let parent = slash == 0 ? "/" : String(decoding: bytes[..<slash], as: UTF8.self)
    return (parent, String(decoding: bytes[(slash + 1)...], as: UTF8.self))
  }

  private static func lookupError(_ argument: String, option: String, _ error: Errno) -> BackupError {
    switch error {
    case .notDirectory:
      BackupError(.unusablePath, "\(option) \(argument): a component of the path is not a directory")
    case .nameTooLong:
      BackupError(
        .unusablePath, "\(option) \(argument): the path or a name in it is too long (names at most \(nameMax) bytes)")
    case .tooManySymlinks:
      BackupError(.unusablePath, "\(option) \(argument): too many levels of symlinks")
    default:
      BackupError(.unusablePath, "\(option) \(argument): cannot look it up: \(error)")
    }
  }
}
