#if canImport(Glibc)
  import Glibc
#endif

/// The reply buffer of one readdir request, implemented by the driver (libfuse's
/// direntry encoding in the FUSE bridge, a list in tests).
public protocol DirectoryFiller: ~Copyable {
  /// Whether this is `readdirplus` (entries carry attributes and hold a lookup).
  var plus: Bool { get }

  /// Adds a plain entry (`st_ino` and the type bits of `st_mode` are used).
  /// - Returns: false, adding nothing, when the buffer is full.
  mutating func add(name: FileName, attributes: stat, nextOffset: off_t) -> Bool

  /// Adds a readdirplus entry. The caller has already taken the lookup `entry` carries and
  /// must give it back when this returns false.
  /// - Returns: false, adding nothing, when the buffer is full.
  mutating func add(name: FileName, entry: Entry, nextOffset: off_t) -> Bool
}
