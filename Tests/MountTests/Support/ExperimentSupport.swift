import Foundation
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Helpers for the quota-experiment tests: every event, `appbox resize`, held files.
enum Experiment {
  /// Every event so far of the given type (`appbox events MOUNT`), in log order.
  static func events(_ mountpoint: String, type: String) throws -> [[String: Any]] {
    let result = try Command.run(Command.appbox, ["events", mountpoint])
    return result.output.split(separator: "\n").compactMap {
      (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
    }.filter { $0["type"] as? String == type }
  }

  /// The events of a type once there are at least `count` (the daemon writes its log
  /// off the request path), or what there is after 10 s.
  static func events(_ mountpoint: String, type: String, atLeast count: Int) throws -> [[String: Any]] {
    var found: [[String: Any]] = []
    _ = try Quota.poll {
      found = try events(mountpoint, type: type)
      return found.count >= count
    }
    return found
  }

  /// A number field of an event.
  static func number(_ event: [String: Any], _ key: String) -> Double {
    (event[key] as? NSNumber)?.doubleValue ?? .nan
  }

  /// `appbox resize MOUNT --capacity SIZE`.
  static func resize(_ mountpoint: String, _ size: String) throws -> CommandResult {
    try Command.run(Command.appbox, ["resize", mountpoint, "--capacity", size])
  }

  /// The mount root's `user.appbox.capacity`, or nil.
  static func capacityAttribute(_ mountpoint: String) -> Int64? {
    guard let value = try? Xattr.value(path: mountpoint, name: "user.appbox.capacity") else { return nil }
    return Int64(String(decoding: value, as: UTF8.self))
  }

  /// Writes up to `count` bytes to a new file in 256 KiB writes until one fails.
  /// - Returns: the bytes written and the errno that stopped it (0: all written).
  static func writeUntilFull(_ path: String, count: Int) -> (written: Int, error: Int32) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { return (0, errno) }
    defer { close(fd) }
    let chunk = [UInt8](repeating: 0x5A, count: 256 << 10)
    var done = 0
    while done < count {
      let written = write(fd, chunk, min(chunk.count, count - done))
      if written < 0 { return (done, errno) }
      if written == 0 { return (done, ENOSPC) }
      done += written
    }
    return (done, 0)
  }
}
