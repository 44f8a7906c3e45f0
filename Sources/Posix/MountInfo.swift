#if canImport(Glibc)
  import Glibc
#endif

/// One mount as `/proc/self/mountinfo` describes it: where, its filesystem type (e.g.
/// `fuse.appbox`), and what the kernel recorded about it.
public struct MountInfoEntry: Sendable {
  /// The mountpoint, unescaped.
  public let mountpoint: String
  /// The filesystem type, `fuse.SUBTYPE` for FUSE.
  public let type: String
  /// The device (`major:minor`), which `stat` reports as `st_dev` for every file on it.
  public let device: String
  /// The superblock's options; FUSE's include `user_id=` and `group_id=`.
  public let superOptions: [String]

  /// Whether it is a FUSE mount (AppBox's or another filesystem's).
  public var isFUSE: Bool { type == "fuse" || type.hasPrefix("fuse.") }

  /// For a FUSE mount: the user who mounted it (`user_id=`, which the kernel sets from
  /// the mounting process, so no one can claim another user's mount).
  public var ownerUID: uid_t? {
    superOptions.first { $0.hasPrefix("user_id=") }.flatMap { uid_t($0.dropFirst("user_id=".count)) }
  }

  /// For a FUSE mount: the group of the user who mounted it (`group_id=`).
  public var ownerGID: gid_t? {
    superOptions.first { $0.hasPrefix("group_id=") }.flatMap { gid_t($0.dropFirst("group_id=".count)) }
  }

  /// The device number `stat` reports for files on this mount.
  public var deviceNumber: dev_t? {
    let parts = device.split(separator: ":")
    guard parts.count == 2, let major = UInt64(parts[0]), let minor = UInt64(parts[1]) else { return nil }
    // glibc's makedev.
    let low: UInt64 = (minor & 0xff) | ((major & 0xfff) << 8)
    let high: UInt64 = ((minor & ~0xff) << 12) | ((major & ~0xfff) << 32)
    return dev_t(low | high)
  }

  /// Parses the lines of `/proc/self/mountinfo`; a line that is not of its form is left out.
  public static func parse(_ bytes: [UInt8]) -> [MountInfoEntry] {
    bytes.split(separator: 0x0A).compactMap { line in
      let fields = line.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
      guard fields.count > 6, let dash = fields.firstIndex(of: "-"), dash + 3 < fields.count else { return nil }
      return MountInfoEntry(
        mountpoint: unescape(fields[4]), type: fields[dash + 1], device: fields[2],
        superOptions: fields[dash + 3].split(separator: ",").map(String.init))
    }
  }

  /// mountinfo escapes space, tab, newline and backslash as `\ooo`.
  public static func unescape(_ field: String) -> String {
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

extension Sys {
  /// Every current mount of this process's mount namespace (`/proc/self/mountinfo`, read
  /// to its end: a `/proc` file comes a page per read).
  public static func mounts() throws(Errno) -> [MountInfoEntry] {
    MountInfoEntry.parse(try readFile("/proc/self/mountinfo"))
  }
}
