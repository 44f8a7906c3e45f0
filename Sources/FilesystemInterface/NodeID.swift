/// A node id: what the kernel calls an inode number on the wire.
///
/// Distinct from `st_ino` (what programs see in `stat`): a filesystem may use any value
/// it can map back to its node in O(1), except ``root`` which is fixed by FUSE.
public struct NodeID: Hashable, Sendable {
  /// The raw value (`fuse_ino_t` in the FUSE bridge).
  public let rawValue: UInt64
  /// Wraps a raw node id.
  @inlinable public init(rawValue: UInt64) { self.rawValue = rawValue }
  /// The container's root (`FUSE_ROOT_ID`).
  public static let root = NodeID(rawValue: 1)
}

/// An open file's or directory's handle: chosen by the filesystem when it opens
/// (``OpenedFile/handle``), passed back by the kernel with every request on that open.
public struct FileHandle: Hashable, Sendable {
  /// The raw value (`fuse_file_info.fh` in the FUSE bridge).
  public let rawValue: UInt64
  /// Wraps a raw handle.
  @inlinable public init(rawValue: UInt64) { self.rawValue = rawValue }
  /// No handle: a directory the kernel opened without asking (``Filesystem/needsOpendir``).
  public static let none = FileHandle(rawValue: 0)
}
