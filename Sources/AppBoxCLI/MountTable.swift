import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// The mount table (`/proc/self/mountinfo`, ``Sys/mounts()``), as the commands ask it.
enum MountTable {
  /// The filesystem type of every AppBox mount.
  static let appboxType = "fuse.appbox"

  /// One mount (``MountInfoEntry``, which parses mountinfo).
  typealias Mount = MountInfoEntry

  /// Every current mount.
  static func mounts() throws(CLIError) -> [Mount] {
    do { return try Sys.mounts() } catch {
      throw CLIError(.osError, "cannot read /proc/self/mountinfo: \(error)")
    }
  }

  /// The mount at exactly `path`, if any (the last one, which is what is visible).
  static func mount(at path: String) throws(CLIError) -> Mount? {
    try mounts().last { $0.mountpoint == path }
  }
}

extension MountInfoEntry {
  /// Whether it is an AppBox mount by its type, `fuse.appbox` (the subtype AppBox always
  /// sets and refuses to let a user change). The type alone proves nothing about who
  /// serves it: a command believes a daemon only after ``ControlClient`` has checked
  /// its owner, runtime directory, pid file and peer (docs/reference.md#security). The
  /// source (`fsname`) is the user's to choose and plays no part.
  var isAppBox: Bool { type == MountTable.appboxType }
}
