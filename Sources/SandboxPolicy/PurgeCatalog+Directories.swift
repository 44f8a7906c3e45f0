extension PurgeCatalog {
  // MARK: - Directories

  /// Starts tracking a directory below a purgeable domain root.
  /// - Parameters:
  ///   - ino: The backing inode number; must not be tracked yet (as a file or directory).
  ///   - parent: `.root(.caches)` or `.root(.tmp)` for a directory directly in the domain's
  ///     top directory, else its registered parent directory.
  ///   - name: The directory's name, as raw bytes.
  public func registerDirectory(ino: UInt64, parent: Parent, name: [UInt8]) {
    precondition(fileIndex[ino] == nil, "PurgeCatalog: \(ino) is a file")
    let (parentSlot, domain, container) = resolve(parent)
    let stored = storeName(name)
    let directory = DirectorySlot(
      ino: ino, nameOffset: stored.offset, parent: parentSlot, childCount: 0,
      nameLength: stored.length, domain: domain, container: container)
    let slot: Int32
    if let free = freeDirectorySlots.popLast() {
      slot = free
      directories[Int(slot)] = directory
    } else {
      precondition(directories.count < Int(Int32.max), "PurgeCatalog: too many directories")
      slot = Int32(directories.count)
      directories.append(directory)
    }
    let previous = directoryIndex.updateValue(slot, forKey: ino)
    precondition(previous == nil, "PurgeCatalog: directory \(ino) registered twice")
    adjustChildCount(parentSlot, by: 1)
  }

  /// Records a rename of a directory within the purgeable domains. Descendants follow
  /// (their paths are derived from the parent chain). A move between `tmp` and `caches`
  /// also moves every descendant file to the other domain's lists, which scans all
  /// directories and the old domain's files (rare; O(files)). A move out of the purgeable
  /// domains is `removeSubtree(directory:)`.
  /// - Parameters:
  ///   - ino: The directory's backing inode number.
  ///   - newParent: The directory it is now in; must not be the directory or inside it.
  ///   - newName: Its new name.
  /// - Returns: Whether the directory was tracked.
  @discardableResult
  public func renameDirectory(ino: UInt64, to newParent: Parent, newName: [UInt8]) -> Bool {
    guard let slot = directoryIndex[ino] else { return false }
    let (parentSlot, domain, container) = resolve(newParent)
    precondition(
      container == directories[Int(slot)].container, "PurgeCatalog: directory \(ino) moved to another container")
    var ancestor = parentSlot
    while ancestor >= 0 {
      precondition(ancestor != slot, "PurgeCatalog: directory \(ino) moved into itself")
      ancestor = directories[Int(ancestor)].parent
    }
    let old = directories[Int(slot)]
    let stored = storeName(newName)
    releaseName(length: old.nameLength)
    adjustChildCount(old.parent, by: -1)
    adjustChildCount(parentSlot, by: 1)
    directories[Int(slot)].parent = parentSlot
    directories[Int(slot)].nameOffset = stored.offset
    directories[Int(slot)].nameLength = stored.length
    if domain != old.domain { moveSubtreeDomain(root: slot, from: old.domain, to: domain) }
    compactNamesIfNeeded()
    return true
  }

  /// Stops tracking an empty directory (it was removed from the backing tree).
  /// - Parameter ino: The directory's backing inode number.
  /// - Returns: Whether the directory was tracked and empty (a directory that still has
  ///   tracked children stays: use `removeSubtree(directory:)`).
  @discardableResult
  public func removeDirectory(ino: UInt64) -> Bool {
    guard let slot = directoryIndex[ino], directories[Int(slot)].childCount == 0 else { return false }
    directoryIndex[ino] = nil
    freeDirectorySlot(slot)
    compactNamesIfNeeded()
    return true
  }

  /// Stops tracking a directory and everything inside it, as when it is moved out of the
  /// purgeable domains. Scans every directory and file slot: O(files), for rare operations.
  /// - Parameter ino: The directory's backing inode number.
  /// - Returns: The inode numbers of the files that were tracked inside it (empty if the
  ///   directory was not tracked).
  public func removeSubtree(directory ino: UInt64) -> [UInt64] {
    guard let root = directoryIndex[ino] else { return [] }
    let inside = subtreeMembership(root: root)
    var removed: [UInt64] = []
    for index in files.indices {
      let file = files[index]
      guard file.domain != Self.freeMarker, file.parent >= 0, inside[Int(file.parent)] else {
        continue
      }
      fileIndex[file.ino] = nil
      freeFileSlot(Int32(index))
      removed.append(file.ino)
    }
    // Children before parents is not needed: child counts of removed directories are
    // dropped with them; only the subtree root's parent loses a child.
    for index in directories.indices where inside[index] {
      directoryIndex[directories[index].ino] = nil
      directories[index].childCount = 0
    }
    for index in directories.indices where inside[index] && Int32(index) != root {
      releaseName(length: directories[index].nameLength)
      directories[index].domain = Self.freeMarker
      freeDirectorySlots.append(Int32(index))
    }
    freeDirectorySlot(root)
    compactNamesIfNeeded()
    return removed
  }

  /// Stops tracking every file and directory of a container, as when it is removed.
  /// Scans every slot: O(files), for rare operations.
  /// - Parameter container: The container.
  /// - Returns: The inode numbers of the files that were tracked in it.
  @discardableResult
  public func removeContainer(_ container: ContainerNumber) -> [UInt64] {
    let number = container.rawValue
    var removed: [UInt64] = []
    for index in files.indices where files[index].domain != Self.freeMarker && files[index].container == number {
      let ino = files[index].ino
      fileIndex[ino] = nil
      freeFileSlot(Int32(index))
      removed.append(ino)
    }
    for index in directories.indices
    where directories[index].domain != Self.freeMarker && directories[index].container == number {
      directoryIndex[directories[index].ino] = nil
      releaseName(length: directories[index].nameLength)
      directories[index].domain = Self.freeMarker
      directories[index].childCount = 0
      freeDirectorySlots.append(Int32(index))
    }
    compactNamesIfNeeded()
    return removed
  }

  /// Whether a directory is tracked.
  /// - Parameter ino: The backing inode number.
  public func containsDirectory(ino: UInt64) -> Bool {
    directoryIndex[ino] != nil
  }

  /// The domain of a tracked directory, or nil if it is not tracked.
  /// - Parameter ino: The backing inode number.
  public func domainOfDirectory(ino: UInt64) -> StorageDomain? {
    guard let slot = directoryIndex[ino] else { return nil }
    return StorageDomain(rawValue: directories[Int(slot)].domain)
  }

  // MARK: - Helpers

  /// Frees a directory slot whose index entry is already gone.
  func freeDirectorySlot(_ slot: Int32) {
    let directory = directories[Int(slot)]
    adjustChildCount(directory.parent, by: -1)
    releaseName(length: directory.nameLength)
    directories[Int(slot)].domain = Self.freeMarker
    freeDirectorySlots.append(slot)
  }

  /// For every directory slot, whether it is `root` or inside it.
  func subtreeMembership(root: Int32) -> [Bool] {
    // 0 unknown, 1 inside, 2 outside.
    var state = [UInt8](repeating: 0, count: directories.count)
    state[Int(root)] = 1
    var chain: [Int32] = []
    for index in directories.indices where directories[index].domain != Self.freeMarker {
      var current = Int32(index)
      chain.removeAll(keepingCapacity: true)
      var result: UInt8 = 2
      while current >= 0 {
        if state[Int(current)] != 0 {
          result = state[Int(current)]
          break
        }
        chain.append(current)
        current = directories[Int(current)].parent
      }
      for member in chain { state[Int(member)] = result }
    }
    return state.map { $0 == 1 }
  }

  /// Moves a directory subtree and its files from one purgeable domain to the other,
  /// keeping the files' relative LRU order and placing them by `lastUse` in the new lists.
  func moveSubtreeDomain(root: Int32, from oldDomain: UInt8, to newDomain: UInt8) {
    let inside = subtreeMembership(root: root)
    for index in directories.indices where inside[index] {
      directories[index].domain = newDomain
    }
    let oldRank = Self.rank(ofDomain: oldDomain)
    let newRank = Self.rank(ofDomain: newDomain)
    for urgency in PurgeUrgency.allCases {
      let oldBucket = Self.bucket(rank: oldRank, urgency: urgency)
      let newBucket = Self.bucket(rank: newRank, urgency: urgency)
      var moved: [Int32] = []
      var slot = heads[oldBucket]
      while slot >= 0 {
        let parent = files[Int(slot)].parent
        if parent >= 0 && inside[Int(parent)] { moved.append(slot) }
        slot = files[Int(slot)].next
      }
      guard !moved.isEmpty else { continue }
      for slot in moved {
        unlink(slot, bucket: oldBucket)
        moveBytes(of: files[Int(slot)], from: oldDomain, to: newDomain)
        files[Int(slot)].domain = newDomain
        link(slot, bucket: newBucket, after: tails[newBucket])
      }
      sortBucket(newBucket)
    }
  }
}
