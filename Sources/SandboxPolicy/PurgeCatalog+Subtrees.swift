extension PurgeCatalog {
  // MARK: - Subtrees that move in from another domain

  /// A file to start tracking, as ``addFiles(_:)`` takes it.
  public struct Addition: Sendable {
    /// The backing inode number.
    public var ino: UInt64
    /// The registered directory (or purgeable root) the file is in.
    public var parent: Parent
    /// The file's name, as raw bytes.
    public var name: [UInt8]
    /// The file's size as the caller counts it, ≥ 0.
    public var bytes: Int64
    /// The file's purge urgency.
    public var urgency: PurgeUrgency
    /// When the file was last used.
    public var lastUse: UInt32

    /// An addition; see the properties.
    public init(ino: UInt64, parent: Parent, name: [UInt8], bytes: Int64, urgency: PurgeUrgency, lastUse: UInt32) {
      self.ino = ino
      self.parent = parent
      self.name = name
      self.bytes = bytes
      self.urgency = urgency
      self.lastUse = lastUse
    }
  }

  /// Starts tracking many files at once, each at its own `lastUse` place, as when a
  /// directory moves into a purgeable domain. Files already tracked (as a file or a
  /// directory) and files whose parent is no longer registered are skipped. Sorting the
  /// batch and merging it into each list from the newest end costs O(k log k) for k files
  /// plus the files of a list newer than the batch's oldest (one `addFile` each would walk
  /// that far for every file).
  /// - Parameter additions: The files, in any order.
  /// - Returns: The inode numbers added, in the order given.
  @discardableResult
  public func addFiles(_ additions: [Addition]) -> [UInt64] {
    var added: [Int32] = []
    var inodes: [UInt64] = []
    added.reserveCapacity(additions.count)
    for addition in additions {
      precondition(addition.bytes >= 0, "PurgeCatalog: negative size \(addition.bytes)")
      guard fileIndex[addition.ino] == nil, directoryIndex[addition.ino] == nil else { continue }
      if case .directory(let parent) = addition.parent, directoryIndex[parent] == nil { continue }
      // Linked at its place below, in one pass per bucket.
      let wasBulk = isBulkLoading
      isBulkLoading = true
      addFile(
        ino: addition.ino, parent: addition.parent, name: addition.name, bytes: addition.bytes,
        urgency: addition.urgency, lastUse: addition.lastUse)
      isBulkLoading = wasBulk
      let slot = fileIndex[addition.ino]!
      unlink(slot, bucket: bucket(ofFile: slot))
      added.append(slot)
      inodes.append(addition.ino)
    }
    var byBucket = [[Int32]](repeating: [], count: Self.bucketCount)
    for slot in added { byBucket[bucket(ofFile: slot)].append(slot) }
    for (bucket, slots) in byBucket.enumerated() where !slots.isEmpty {
      // Oldest first, ties in the order given; linked newest first, each after every
      // file of the list with the same or an older time, so ties keep that order.
      let sorted = slots.enumerated().sorted {
        (files[Int($0.element)].lastUse, $0.offset) < (files[Int($1.element)].lastUse, $1.offset)
      }.map(\.element)
      var after = tails[bucket]
      for slot in sorted.reversed() {
        let lastUse = files[Int(slot)].lastUse
        while after >= 0 && files[Int(after)].lastUse > lastUse { after = files[Int(after)].prev }
        link(slot, bucket: bucket, after: after)
      }
    }
    return inodes
  }

  /// Whether a tracked directory is `root` or inside it (O(depth)).
  /// - Parameters:
  ///   - ino: The directory's backing inode number.
  ///   - root: The subtree's top directory.
  /// - Returns: false when either is not tracked.
  public func isDirectory(_ ino: UInt64, inside root: UInt64) -> Bool {
    guard var slot = directoryIndex[ino], let rootSlot = directoryIndex[root] else { return false }
    while slot >= 0 {
      if slot == rootSlot { return true }
      slot = directories[Int(slot)].parent
    }
    return false
  }
}
