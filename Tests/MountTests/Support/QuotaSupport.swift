import Foundation
import Posix
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Helpers for the quota and purge mount tests: status, events, `du`, `statfs`, and
/// writing and using files with plain syscalls.
enum Quota {
  static let mebibyte = 1 << 20

  // MARK: - Observing the daemon

  /// `appbox status MOUNT --json`, decoded.
  static func status(_ mountpoint: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    let result = try Command.run(Command.appbox, ["status", mountpoint, "--json"])
    #expect(result.status == 0, "appbox status: \(result.error)", sourceLocation: sourceLocation)
    let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8))
    guard let dictionary = object as? [String: Any] else {
      throw FixtureError("status is not an object: \(result.output)")
    }
    return dictionary
  }

  /// An integer field of a status object (`"usage.caches"` reaches into nested objects).
  static func number(_ status: [String: Any], _ key: String) -> Int64 {
    var value: Any? = status
    for part in key.split(separator: ".") { value = (value as? [String: Any])?[String(part)] }
    return (value as? NSNumber)?.int64Value ?? -1
  }

  /// The purge events so far (`appbox events MOUNT`).
  static func events(_ mountpoint: String) throws -> [[String: Any]] {
    let result = try Command.run(Command.appbox, ["events", mountpoint])
    return result.output.split(separator: "\n").compactMap {
      (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
    }.filter { $0["type"] as? String == "purge" }
  }

  /// Purge events' paths, in log order.
  static func purgedPaths(_ mountpoint: String, reason: String? = nil) throws -> [String] {
    try events(mountpoint).filter { reason == nil || $0["reason"] as? String == reason }.compactMap {
      $0["path"] as? String
    }
  }

  /// Allocated bytes of a tree as `du --block-size=1 -s` counts them.
  static func du(_ path: String) throws -> Int64 {
    let result = try Command.run("du", ["--block-size=1", "-s", path])
    guard result.status == 0, let first = result.output.split(whereSeparator: { $0 == "\t" || $0 == " " }).first,
      let bytes = Int64(first)
    else { throw FixtureError("du \(path): \(result.error)") }
    return bytes
  }

  /// `statvfs` of a path.
  static func statfs(_ path: String) throws -> statvfs {
    var buffer = statvfs()
    guard statvfs(path, &buffer) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return buffer
  }

  /// Waits for the daemon to have released every handle (release is asynchronous after
  /// close, and an open file is never purged).
  static func waitForReleases(_ fixture: MountFixture) -> Bool {
    fixture.waitUntil { fixture.openFileHandles().isEmpty }
  }

  /// Writes back and drops the cached pages of the file at `path`
  /// (`posix_fadvise(POSIX_FADV_DONTNEED)` after `fsync`): what `drop_caches` does for one
  /// file, without root's write access to `/proc/sys`.
  static func dropCachedPages(_ path: String) throws {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(fd) }
    guard fsync(fd) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    let result = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
    guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
  }

  /// Polls `condition` every 10 ms until it holds or `seconds` pass.
  static func poll(seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
      if try condition() { return true }
      usleep(10_000)
    }
    return try condition()
  }

  // MARK: - Files

  /// Creates (or truncates) a file with `count` patterned bytes through plain `write`s of
  /// at most 256 KiB, and closes it.
  @discardableResult
  static func writeFile(_ path: String, count: Int, seed: UInt64 = 1) throws -> [UInt8] {
    let bytes = pattern(count, seed: seed)
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw FixtureError("open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var done = 0
    while done < count {
      let chunk = min(256 << 10, count - done)
      let written = bytes.withUnsafeBufferPointer { write(fd, $0.baseAddress! + done, chunk) }
      guard written > 0 else { throw FixtureError("write \(path) at \(done): \(String(cString: strerror(errno)))") }
      done += written
    }
    return bytes
  }

  /// Uses a file the way an app would: open, read all of it, close.
  static func use(_ path: String) throws {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw FixtureError("open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    while read(fd, &buffer, buffer.count) > 0 {}
  }

  /// The whole content of a file, or nil with `errno` set.
  static func contents(_ path: String) -> [UInt8]? {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    return [UInt8](data)
  }

  /// Whether `lstat` finds the path.
  static func exists(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0
  }

  /// `errno` of `lstat` on the path (0 when it exists).
  static func statError(_ path: String) -> Int32 {
    var st = stat()
    return lstat(path, &st) == 0 ? 0 : errno
  }

  /// `errno` of `open(O_RDONLY)` on the path (0 when it opens).
  static func openError(_ path: String) -> Int32 {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    if fd >= 0 {
      close(fd)
      return 0
    }
    return errno
  }

  /// Sets a file's purge urgency attribute.
  static func setUrgency(_ path: String, _ urgency: String) throws {
    do throws(Errno) {
      try Xattr.set(path: path, name: "user.appbox.purge-urgency", value: Array(urgency.utf8))
    } catch { throw FixtureError("setxattr \(path): \(error)") }
  }

  /// `appbox purge MOUNT ARGS...`.
  @discardableResult
  static func purge(_ mountpoint: String, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation)
    throws -> String
  {
    let result = try Command.run(Command.appbox, ["purge", mountpoint] + arguments)
    #expect(result.status == 0, "appbox purge \(arguments): \(result.error)", sourceLocation: sourceLocation)
    return result.output
  }

  /// Checks the books against the backing tree: `used` is what `du` counts, `free` is
  /// capacity − used, and `statfs` on the mount agrees.
  static func expectBooksMatch(
    _ fixture: MountFixture, capacity: Int64, sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    let status = try status(fixture.mountpoint)
    let used = number(status, "used")
    let du = try du(fixture.backing)
    #expect(used == du, "status used \(used) != du \(du) (diff \(used - du))", sourceLocation: sourceLocation)
    #expect(number(status, "capacity") == capacity, sourceLocation: sourceLocation)
    let free = number(status, "free")
    #expect(free == max(0, capacity - used), sourceLocation: sourceLocation)
    let fs = try statfs(fixture.mountpoint)
    #expect(fs.f_bsize == 4096, sourceLocation: sourceLocation)
    #expect(Int64(fs.f_blocks) == capacity / 4096, sourceLocation: sourceLocation)
    #expect(
      Int64(fs.f_bavail) == free / 4096, "f_bavail \(fs.f_bavail) vs free \(free)", sourceLocation: sourceLocation)
  }
}

extension Quota {
  /// Whether a file holds exactly `expected` (compares every byte; prints nothing big).
  static func matches(_ path: String, _ expected: [UInt8]) -> Bool {
    contents(path) == expected
  }
}
