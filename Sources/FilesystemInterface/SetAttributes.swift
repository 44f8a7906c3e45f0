/// Which attributes a setattr request changes. The bits are this module's own; the FUSE
/// bridge maps `FUSE_SET_ATTR_*` onto them.
public struct SetAttributes: OptionSet, Sendable {
  /// The bits.
  public let rawValue: UInt32
  /// Wraps bits.
  public init(rawValue: UInt32) { self.rawValue = rawValue }
  /// The mode (`st_mode`'s permission bits).
  public static let mode = SetAttributes(rawValue: 1 << 0)
  /// The owner.
  public static let uid = SetAttributes(rawValue: 1 << 1)
  /// The group.
  public static let gid = SetAttributes(rawValue: 1 << 2)
  /// The size (a truncate).
  public static let size = SetAttributes(rawValue: 1 << 3)
  /// The access time, to `st_atim`.
  public static let atime = SetAttributes(rawValue: 1 << 4)
  /// The modification time, to `st_mtim`.
  public static let mtime = SetAttributes(rawValue: 1 << 5)
  /// The access time, to now.
  public static let atimeNow = SetAttributes(rawValue: 1 << 6)
  /// The modification time, to now.
  public static let mtimeNow = SetAttributes(rawValue: 1 << 7)
  /// The change time.
  public static let ctime = SetAttributes(rawValue: 1 << 8)
  /// A truncate or chown by a caller without CAP_FSETID (the kernel's
  /// `FATTR_KILL_SUIDGID` under FUSE_HANDLE_KILLPRIV_V2): clear set-user-ID, and
  /// set-group-ID with group execute.
  public static let killSetID = SetAttributes(rawValue: 1 << 9)
}
