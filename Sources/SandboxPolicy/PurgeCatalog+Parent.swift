extension PurgeCatalog {
  /// Where a tracked file or directory sits: directly in a purgeable domain's top directory,
  /// or in a registered directory below it.
  public enum Parent: Hashable, Sendable {
    /// The top directory of a purgeable domain in a container: `Library/Caches` for
    /// `caches`, `tmp` for `tmp` (a plain mount's one container, unless said).
    case root(StorageDomain, container: ContainerNumber = .top)
    /// A registered directory, by backing inode number.
    case directory(UInt64)

    /// The directory's inode number, or nil for a domain root.
    public var directoryInode: UInt64? {
      if case .directory(let ino) = self { return ino }
      return nil
    }
  }
}
