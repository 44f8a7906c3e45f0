extension PurgeCatalog {
  // MARK: - Paths

  /// A tracked file's path from the mount root, e.g. `["Library", "Caches", "a", "b.dat"]`,
  /// built by walking its directory chain.
  /// - Parameter ino: The file's backing inode number.
  /// - Returns: The path components, or nil if the file is not tracked.
  public func path(ofFile ino: UInt64) -> [[UInt8]]? {
    guard let slot = fileIndex[ino] else { return nil }
    let file = files[Int(slot)]
    var reversed = [name(offset: file.nameOffset, length: file.nameLength)]
    return finishPath(&reversed, directory: file.parent, domain: file.domain, container: file.container)
  }

  /// The path of a tracked parent from the mount root: a container's domain root, or a
  /// registered directory.
  /// - Returns: The path components, or nil if the directory is not tracked.
  public func path(of parent: Parent) -> [[UInt8]]? {
    switch parent {
    case .root(let domain, let container): (containerPaths[container] ?? []) + domain.rootComponents
    case .directory(let ino): path(ofDirectory: ino)
    }
  }

  /// A tracked directory's path from the mount root, e.g. `["tmp", "work"]`.
  /// - Parameter ino: The directory's backing inode number.
  /// - Returns: The path components, or nil if the directory is not tracked.
  public func path(ofDirectory ino: UInt64) -> [[UInt8]]? {
    guard let slot = directoryIndex[ino] else { return nil }
    var reversed: [[UInt8]] = []
    let directory = directories[Int(slot)]
    return finishPath(&reversed, directory: slot, domain: directory.domain, container: directory.container)
  }

  /// Appends the names of a directory chain to reversed components, then the domain root
  /// and the container's path.
  private func finishPath(_ reversed: inout [[UInt8]], directory: Int32, domain: UInt8, container: UInt32)
    -> [[UInt8]]
  {
    var current = directory
    var depth = 0
    while current >= 0 {
      let entry = directories[Int(current)]
      reversed.append(name(offset: entry.nameOffset, length: entry.nameLength))
      current = entry.parent
      depth += 1
      precondition(depth <= directories.count, "PurgeCatalog: directory cycle")
    }
    return (containerPaths[ContainerNumber(rawValue: container)] ?? [])
      + StorageDomain(rawValue: domain)!.rootComponents
      + reversed.reversed()
  }
}
