import Foundation

/// File chores of the fixture that Foundation does best (kept apart: Foundation's
/// `FileHandle` would clash with the filesystem interface's).
enum TestFiles {
  /// Removes `path` and everything below it.
  static func removeTree(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
  }

  /// The names in directory `path` (none when it cannot be listed).
  static func entries(of path: String) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
  }

  /// The text of the file at `path`.
  static func text(of path: String) -> String? {
    try? String(contentsOfFile: path, encoding: .utf8)
  }
}
