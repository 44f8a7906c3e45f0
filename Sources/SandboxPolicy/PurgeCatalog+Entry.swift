extension PurgeCatalog {
  /// A snapshot of one tracked file.
  public struct Entry: Hashable, Sendable {
    /// The file's domain, `caches` or `tmp`.
    public var domain: StorageDomain
    /// The file's size as the caller counts it.
    public var bytes: Int64
    /// The file's purge urgency.
    public var urgency: PurgeUrgency
    /// When the file was last used (see `PurgeCatalog`'s documentation of time).
    public var lastUse: UInt32
    /// The number of open handles.
    public var openCount: Int
    /// The directory the file is in.
    public var parent: Parent
    /// The file's name, as raw bytes.
    public var name: [UInt8]
    /// The file's container.
    public var container: ContainerNumber = .top
  }
}
