import Posix
import Testing

@testable import AppBoxBackup

#if canImport(Glibc)
  import Glibc
#endif

/// A temporary directory for one test, removed (whatever its modes) when released.
final class Scratch {
  let path: String

  init() throws {
    path = try Sys.makeTemporaryDirectory(prefix: "/tmp/appbox-backup-test-")
  }

  deinit {
    // Absent once a test removed it: nothing else to do.
    do throws(Errno) { try Directory.removeTree(AT_FDCWD, Array(path.utf8CString)) } catch {}
  }

  /// A path inside.
  func callAsFunction(_ relative: String) -> String { path + "/" + relative }

  /// Names in a directory, sorted (`.` and `..` left out).
  static func names(_ directory: String) throws -> [String] {
    let stream = try DirectoryStream(fd: try Sys.open(directory, O_RDONLY | O_DIRECTORY))
    var names: [String] = []
    while let item = try stream.next() {
      let name = String(cString: item.name)
      if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
  }

  /// Writes a file.
  static func write(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o644) throws {
    let fd = try Sys.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
    defer { Sys.close(fd) }
    try Sys.writeAll(fd, bytes)
  }

  /// Reads a file whole.
  static func read(_ path: String) throws -> [UInt8] { try Sys.readFile(path) }

  /// `lstat`.
  static func status(_ path: String) throws -> stat { try Sys.lstatPath(path) }

  /// A sandbox's backing directory (Documents, Library with its three, tmp), not mounted.
  func sandbox(_ name: String = "sandbox") throws -> String {
    let root = self(name)
    for directory in [
      "", "/Documents", "/Library", "/Library/Application Support", "/Library/Preferences", "/Library/Caches", "/tmp",
    ] {
      try Sys.mkdir(root + directory, 0o755)
    }
    return root
  }
}
