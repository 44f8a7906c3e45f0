/// The kernel's writeback cache on a mount (`--write-cache`): writes through handles that
/// use it stay in the kernel's page cache and reach the filesystem later, as `WRITE`
/// requests of whole pages (``WriteOrigin/writeback``), when the kernel writes them back:
/// under memory pressure, at `fsync`, and at the latest when the file is closed.
public struct WriteCache: Sendable, Equatable {
  /// The most the kernel holds written but not yet written back for the whole mount, in
  /// bytes: its dirty-page limit for the mount's backing device (`max_bytes` of
  /// `/sys/class/bdi/MAJOR:MINOR`), beyond which a writer waits for write-back.
  public var dirtyLimit: Int64

  /// A writeback cache that holds at most `dirtyLimit` bytes unwritten.
  public init(dirtyLimit: Int64) { self.dirtyLimit = dirtyLimit }
}
