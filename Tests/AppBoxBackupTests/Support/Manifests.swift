import Posix
import Testing

@testable import AppBoxBackup

#if canImport(Glibc)
  import Glibc
#endif

/// A backup's `Manifest.db` opened as the tests need it.
enum Manifests {
  /// Creates a database with the schema at `path` (new; its directory exists).
  static func create(_ path: String) throws -> ManifestDatabase {
    let slash = try #require(path.lastIndex(of: "/"))
    let directory = try Sys.open(String(path[..<slash]), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { Sys.close(directory) }
    return try ManifestDatabase(creating: String(path[slash...].dropFirst()), in: directory, displayPath: path)
  }

  /// Opens the database at `path` for reading.
  static func open(_ path: String) throws -> ManifestDatabase {
    let fd = try Sys.open(path, O_RDONLY | O_CLOEXEC)
    defer { Sys.close(fd) }
    return try ManifestDatabase(reading: fd, displayPath: path)
  }

  /// The rows of `Files` in the database at `path`, of every domain.
  static func rowCount(_ path: String) throws -> Int {
    let database = try open(path)
    var count = 0
    for domain in try database.domains() { count += try database.entries(domain: domain).count }
    return count
  }
}
