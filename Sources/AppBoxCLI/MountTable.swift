import Foundation

/// Reads `/proc/self/mountinfo`.
enum MountTable {
  /// One mount: where, and its filesystem type (e.g. `fuse.appbox`).
  struct Mount {
    let mountpoint: String
    let type: String
  }

  /// Every current mount.
  static func mounts() -> [Mount] {
    guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return [] }
    return text.split(separator: "\n").compactMap { line in
      let fields = line.split(separator: " ")
      guard fields.count > 6, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { return nil }
      return Mount(mountpoint: unescape(String(fields[4])), type: String(fields[dash + 1]))
    }
  }

  /// The mount at exactly `path`, if any (the last one, which is what is visible).
  static func mount(at path: String) -> Mount? {
    mounts().last { $0.mountpoint == path }
  }

  /// mountinfo escapes space, tab, newline and backslash as `\ooo`.
  static func unescape(_ field: String) -> String {
    var bytes: [UInt8] = []
    var iterator = Array(field.utf8)[...]
    while let byte = iterator.popFirst() {
      if byte == UInt8(ascii: "\\"), iterator.count >= 3,
        let value = UInt8(String(decoding: iterator.prefix(3), as: UTF8.self), radix: 8)
      {
        bytes.append(value)
        iterator = iterator.dropFirst(3)
      } else {
        bytes.append(byte)
      }
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}
