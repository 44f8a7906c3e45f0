import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// A directory named on the command line that a command creates, or fills when it is an
/// empty one (`backup --to`, `restore --backing`): the resolved path of its parent and its
/// own name.
///
/// Resolved once, from the argument's bytes, without Foundation's path functions: `.`,
/// `./`, `dir/..`, trailing slashes and a symlink to a directory all name the directory a
/// shell user means, and a path that names nothing a command could create gets a clear
/// error (``BackupError`` `.usage` or `.unusablePath`), never a crash.
public struct TargetDirectory: Equatable, Sendable {
  /// The parent directory: absolute, without symlinks, `.` or `..` (`realpath`).
  public let parent: String
  /// The directory's own name: one component, never empty, `.` or `..`, at most 255 bytes.
  public let name: String
  /// Whether the directory existed when the argument was resolved.
  public let existed: Bool

  /// The directory's absolute path.
  public var path: String { parent == "/" ? "/" + name : parent + "/" + name }

  /// The longest name a directory entry may have (`NAME_MAX`).
  static let nameMax = 255

  /// Resolves `argument`, the value of `option` (for messages).
  /// - Throws: ``BackupError`` `.usage` for an empty argument; `.unusablePath` for the root
  ///   directory, an existing item that is not a directory, a dangling symlink, a missing
  ///   parent, a name or path too long, or a path that cannot be looked up.
  public static func resolve(_ argument: String, option: String) throws(BackupError) -> TargetDirectory {
    guard !argument.isEmpty else { throw BackupError(.usage, "\(option) needs a directory, not an empty name") }
    guard !argument.utf8.contains(0) else { throw BackupError(.usage, "\(option): a path cannot hold a NUL byte") }
    guard argument.utf8.count < Int(PATH_MAX) else {
      throw BackupError(
        .unusablePath, "\(option) \(argument.prefix(64))…: the path is too long (at most \(PATH_MAX - 1) bytes)")
    }
    let resolved: String
    do throws(Errno) {
      resolved = try Sys.realpath(argument)
    } catch  where error == .noEntry {
      return try resolveMissing(argument, option: option)
    } catch {
      throw lookupError(argument, option: option, error)
    }
    let status: stat
    do throws(Errno) { status = try Sys.statPath(resolved) } catch {
      throw lookupError(argument, option: option, error)
    }
    guard status.st_mode & S_IFMT == S_IFDIR else {
      throw BackupError(.unusablePath, "\(option) \(argument) is not a directory: give a new or empty directory")
    }
    guard resolved != "/" else {
      throw BackupError(.unusablePath, "\(option) \(argument) is the root directory: give a new or empty directory")
    }
    let (parent, name) = split(resolved)
    return TargetDirectory(parent: parent, name: name, existed: true)
  }

  /// A directory that does not exist yet: its parent must.
  private static func resolveMissing(_ argument: String, option: String) throws(BackupError) -> TargetDirectory {
    // realpath found nothing: whatever lstat still finds is a symlink to nothing.
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
    let parent: String
    do throws(Errno) {
      parent = try Sys.realpath(parentPart)
      let status = try Sys.statPath(parent)
      guard status.st_mode & S_IFMT == S_IFDIR else { throw Errno.notDirectory }
    } catch  where error == .noEntry {
      throw BackupError(.unusablePath, "\(option) \(argument): its parent directory \(parentPart) does not exist")
    } catch {
      throw lookupError(argument, option: option, error)
    }
    return TargetDirectory(parent: parent, name: name, existed: false)
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
