import Foundation

/// File chores of the fixture that Foundation does best (kept apart: Foundation's
/// `FileHandle` would clash with the filesystem interface's).
enum TestFiles {
  /// Removes `path` and everything below it.
  static func removeTree(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)  // already gone: nothing to do
  }

  /// The names in directory `path` (none when it cannot be listed).
  static func entries(of path: String) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
  }

  /// The names in directory `path` as bytes, without `.` and `..`.
  static func rawEntries(of path: String) -> [[UInt8]] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [[UInt8]] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
      if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
    }
    return names
  }

  /// The text of the file at `path`.
  static func text(of path: String) -> String? {
    try? String(contentsOfFile: path, encoding: .utf8)
  }

  /// Writes a new file (or replaces one) with `bytes`.
  static func write(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
  }

  /// Whether anything is at `path`.
  static func exists(_ path: String) -> Bool {
    FileManager.default.fileExists(atPath: path)
  }

  /// A JSON object's text, decoded (nil when it is not one).
  static func jsonObject(_ text: String) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
  }

  /// A number in a decoded JSON object (`"usage.caches"` reaches into nested objects);
  /// -1 when missing.
  static func number(_ object: [String: Any], _ key: String) -> Int64 {
    var value: Any? = object
    for part in key.split(separator: ".") { value = (value as? [String: Any])?[String(part)] }
    return (value as? NSNumber)?.int64Value ?? -1
  }

  /// A floating-point number in a decoded JSON object; NaN when missing.
  static func double(_ object: [String: Any], _ key: String) -> Double {
    (object[key] as? NSNumber)?.doubleValue ?? .nan
  }
}
