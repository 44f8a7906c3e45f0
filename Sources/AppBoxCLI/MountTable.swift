import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// Reads `/proc/self/mountinfo`, to its end (a `/proc` file comes a page per read).
enum MountTable {
  /// The filesystem type of every AppBox mount.
  static let appboxType = "fuse.appbox"

  /// One mount: where, its filesystem type (e.g. `fuse.appbox`), and what the kernel
  /// recorded about it.
  struct Mount {
    /// The mountpoint, unescaped.
    let mountpoint: String
    /// The filesystem type, `fuse.SUBTYPE` for FUSE.
    let type: String
    /// The device (`major:minor`), which `stat` reports as `st_dev` for every file on it.
    let device: String
    /// The superblock's options; FUSE's include `user_id=` and `group_id=`.
    let superOptions: [String]

    /// Whether it is a FUSE mount (AppBox's or another filesystem's).
    var isFUSE: Bool { type == "fuse" || type.hasPrefix("fuse.") }

    /// Whether it is an AppBox mount by its type, `fuse.appbox` (the subtype AppBox always
    /// sets and refuses to let a user change). The type alone proves nothing about who
    /// serves it: a command believes a daemon only after ``ControlClient`` has checked
    /// its owner, runtime directory, pid file and peer (docs/reference.md#security). The
    /// source (`fsname`) is the user's to choose and plays no part.
    var isAppBox: Bool { type == MountTable.appboxType }

    /// For a FUSE mount: the user who mounted it (`user_id=`, which the kernel sets from
    /// the mounting process, so no one can claim another user's mount).
    var ownerUID: uid_t? {
      superOptions.first { $0.hasPrefix("user_id=") }.flatMap { uid_t($0.dropFirst("user_id=".count)) }
    }

    /// For a FUSE mount: the group of the user who mounted it (`group_id=`).
    var ownerGID: gid_t? {
      superOptions.first { $0.hasPrefix("group_id=") }.flatMap { gid_t($0.dropFirst("group_id=".count)) }
    }

    /// The device number `stat` reports for files on this mount.
    var deviceNumber: dev_t? {
      let parts = device.split(separator: ":")
      guard parts.count == 2, let major = UInt64(parts[0]), let minor = UInt64(parts[1]) else { return nil }
      // glibc's makedev.
      let low: UInt64 = (minor & 0xff) | ((major & 0xfff) << 8)
      let high: UInt64 = ((minor & ~0xff) << 12) | ((major & ~0xfff) << 32)
      return dev_t(low | high)
    }
  }

  /// Every current mount.
  static func mounts() throws(CLIError) -> [Mount] {
    let bytes: [UInt8]
    do { bytes = try Sys.readFile("/proc/self/mountinfo") } catch {
      throw CLIError(.osError, "cannot read /proc/self/mountinfo: \(error)")
    }
    return bytes.split(separator: 0x0A).compactMap { line in
      let fields = line.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
      guard fields.count > 6, let dash = fields.firstIndex(of: "-"), dash + 3 < fields.count else { return nil }
      return Mount(
        mountpoint: unescape(fields[4]), type: fields[dash + 1], device: fields[2],
        superOptions: fields[dash + 3].split(separator: ",").map(String.init))
    }
  }

  /// The mount at exactly `path`, if any (the last one, which is what is visible).
  static func mount(at path: String) throws(CLIError) -> Mount? {
    try mounts().last { $0.mountpoint == path }
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
