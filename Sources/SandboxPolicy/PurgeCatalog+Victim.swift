extension PurgeCatalog {
  /// A file chosen for purging. Choosing does not remove it: the filesystem unlinks the
  /// backing file, then calls `removeFile(ino:)`.
  public struct Victim: Hashable, Sendable {
    /// The backing inode number.
    public var ino: UInt64
    /// The directory the file is in.
    public var parent: Parent
    /// The file's name, as raw bytes.
    public var name: [UInt8]
    /// The file's size as the caller counts it.
    public var bytes: Int64
    /// The file's domain, `caches` or `tmp`.
    public var domain: StorageDomain
    /// The file's purge urgency.
    public var urgency: PurgeUrgency
    /// When the file was last used.
    public var lastUse: UInt32
    /// The file's container.
    public var container: ContainerNumber = .top
  }
}
