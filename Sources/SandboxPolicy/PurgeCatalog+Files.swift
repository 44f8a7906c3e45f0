extension PurgeCatalog {
  // MARK: - Adding and removing files

  /// Starts tracking a file.
  /// - Parameters:
  ///   - ino: The backing inode number; must not be tracked yet (as a file or directory).
  ///   - parent: The directory the file is in; a registered directory or a purgeable root.
  ///   - name: The file's name, as raw bytes (1 to 65535 bytes).
  ///   - bytes: The file's size as the caller counts it (AppBox: allocated bytes), ≥ 0.
  ///   - urgency: The file's purge urgency.
  ///   - lastUse: When the file was last used (see the type's documentation of time).
  public func addFile(
    ino: UInt64, parent: Parent, name: [UInt8], bytes: Int64,
    urgency: PurgeUrgency = .none, lastUse: UInt32
  ) {
    precondition(bytes >= 0, "PurgeCatalog: negative size \(bytes)")
    precondition(directoryIndex[ino] == nil, "PurgeCatalog: \(ino) is a directory")
    let (parentSlot, domain, container) = resolve(parent)
    let stored = storeName(name)
    let file = FileSlot(
      ino: ino, bytes: bytes, nameOffset: stored.offset, lastUse: lastUse, openCount: 0,
      parent: parentSlot, prev: -1, next: -1, nameLength: stored.length, domain: domain,
      urgency: urgency.rawValue, container: container)
    let slot: Int32
    if freeFileHead >= 0 {
      slot = freeFileHead
      freeFileHead = files[Int(slot)].next
      files[Int(slot)] = file
    } else {
      precondition(files.count < Int(Int32.max), "PurgeCatalog: too many files")
      slot = Int32(files.count)
      files.append(file)
    }
    let previous = fileIndex.updateValue(slot, forKey: ino)
    precondition(previous == nil, "PurgeCatalog: file \(ino) added twice")
    adjustChildCount(parentSlot, by: 1)
    count(bytes, rank: Self.rank(ofDomain: domain), container: container, open: false)
    linkOrdered(slot, bucket: bucket(ofFile: slot))
  }

  /// Stops tracking a file (it was unlinked, purged or moved out of the purgeable domains).
  /// - Parameter ino: The backing inode number.
  /// - Returns: Whether the file was tracked.
  @discardableResult
  public func removeFile(ino: UInt64) -> Bool {
    guard let slot = fileIndex.removeValue(forKey: ino) else { return false }
    freeFileSlot(slot)
    compactNamesIfNeeded()
    return true
  }

  /// Unlinks a file slot from everything and puts it on the free list; the caller has
  /// already removed it from `fileIndex`.
  func freeFileSlot(_ slot: Int32) {
    let file = files[Int(slot)]
    unlink(slot, bucket: bucket(ofFile: slot))
    let rank = Self.rank(ofDomain: file.domain)
    count(-file.bytes, rank: rank, container: file.container, open: false)
    if file.openCount > 0 { count(-file.bytes, rank: rank, container: file.container, open: true) }
    adjustChildCount(file.parent, by: -1)
    releaseName(length: file.nameLength)
    files[Int(slot)].domain = Self.freeMarker
    files[Int(slot)].next = freeFileHead
    freeFileHead = slot
  }

  // MARK: - Changing files

  /// Records a rename of a file within the purgeable domains (possibly from `tmp` to
  /// `caches` or back) of its container. A move out of them is `removeFile(ino:)`.
  /// - Parameters:
  ///   - ino: The backing inode number.
  ///   - newParent: The directory the file is now in.
  ///   - newName: The file's new name.
  /// - Returns: Whether the file was tracked.
  @discardableResult
  public func moveFile(ino: UInt64, to newParent: Parent, newName: [UInt8]) -> Bool {
    guard let slot = fileIndex[ino] else { return false }
    let (parentSlot, domain, container) = resolve(newParent)
    let old = files[Int(slot)]
    precondition(container == old.container, "PurgeCatalog: file \(ino) moved to another container")
    let stored = storeName(newName)
    releaseName(length: old.nameLength)
    adjustChildCount(old.parent, by: -1)
    adjustChildCount(parentSlot, by: 1)
    files[Int(slot)].parent = parentSlot
    files[Int(slot)].nameOffset = stored.offset
    files[Int(slot)].nameLength = stored.length
    if domain != old.domain {
      unlink(slot, bucket: bucket(ofFile: slot))
      moveBytes(of: old, from: old.domain, to: domain)
      files[Int(slot)].domain = domain
      linkOrdered(slot, bucket: bucket(ofFile: slot))
    }
    compactNamesIfNeeded()
    return true
  }

  /// Moves a file's byte counts from one domain's totals to another's (in its container).
  func moveBytes(of file: FileSlot, from oldDomain: UInt8, to newDomain: UInt8) {
    let oldRank = Self.rank(ofDomain: oldDomain)
    let newRank = Self.rank(ofDomain: newDomain)
    count(-file.bytes, rank: oldRank, container: file.container, open: false)
    count(file.bytes, rank: newRank, container: file.container, open: false)
    if file.openCount > 0 {
      count(-file.bytes, rank: oldRank, container: file.container, open: true)
      count(file.bytes, rank: newRank, container: file.container, open: true)
    }
  }

  /// Records a file's new size.
  /// - Parameters:
  ///   - ino: The backing inode number.
  ///   - bytes: The new size as the caller counts it, ≥ 0.
  /// - Returns: Whether the file was tracked.
  @discardableResult
  public func setBytes(ino: UInt64, _ bytes: Int64) -> Bool {
    precondition(bytes >= 0, "PurgeCatalog: negative size \(bytes)")
    guard let slot = fileIndex[ino] else { return false }
    let file = files[Int(slot)]
    let rank = Self.rank(ofDomain: file.domain)
    count(bytes - file.bytes, rank: rank, container: file.container, open: false)
    if file.openCount > 0 { count(bytes - file.bytes, rank: rank, container: file.container, open: true) }
    files[Int(slot)].bytes = bytes
    return true
  }

  /// Records a use of a file: it becomes the most recently used of its bucket (if `time` is
  /// at least every other file's `lastUse` there; otherwise it moves to its `lastUse` place).
  /// Under the FIFO ``policy`` a use changes nothing.
  /// - Parameters:
  ///   - ino: The backing inode number.
  ///   - time: The time of the use.
  /// - Returns: Whether the file was tracked.
  @discardableResult
  public func touch(ino: UInt64, at time: UInt32) -> Bool {
    guard let slot = fileIndex[ino] else { return false }
    guard policy != .fifo || isBulkLoading else { return true }  // FIFO: uses do not reorder
    let bucket = bucket(ofFile: slot)
    unlink(slot, bucket: bucket)
    files[Int(slot)].lastUse = time
    linkOrdered(slot, bucket: bucket)
    return true
  }

  /// Records a file's new purge urgency; a change moves it to the other bucket at its
  /// `lastUse` place.
  /// - Parameters:
  ///   - ino: The backing inode number.
  ///   - urgency: The new urgency.
  /// - Returns: Whether the file was tracked.
  @discardableResult
  public func setUrgency(ino: UInt64, _ urgency: PurgeUrgency) -> Bool {
    guard let slot = fileIndex[ino] else { return false }
    guard files[Int(slot)].urgency != urgency.rawValue else { return true }
    unlink(slot, bucket: bucket(ofFile: slot))
    files[Int(slot)].urgency = urgency.rawValue
    linkOrdered(slot, bucket: bucket(ofFile: slot))
    return true
  }

  /// Records that a handle to the file was opened; open files are never chosen as victims.
  /// - Parameter ino: The backing inode number.
  /// - Returns: Whether the file was tracked.
  @discardableResult
  public func open(ino: UInt64) -> Bool {
    guard let slot = fileIndex[ino] else { return false }
    let file = files[Int(slot)]
    precondition(file.openCount < UInt32.max, "PurgeCatalog: open count overflow")
    if file.openCount == 0 {
      count(file.bytes, rank: Self.rank(ofDomain: file.domain), container: file.container, open: true)
    }
    files[Int(slot)].openCount += 1
    return true
  }

  /// Records that a handle to the file was closed.
  /// - Parameter ino: The backing inode number.
  /// - Returns: Whether the file was tracked with an open handle (a close of a file that
  ///   was opened before it was tracked changes nothing).
  @discardableResult
  public func close(ino: UInt64) -> Bool {
    guard let slot = fileIndex[ino], files[Int(slot)].openCount > 0 else { return false }
    let file = files[Int(slot)]
    if file.openCount == 1 {
      count(-file.bytes, rank: Self.rank(ofDomain: file.domain), container: file.container, open: true)
    }
    files[Int(slot)].openCount -= 1
    return true
  }

  // MARK: - Reading files

  /// Whether a file is tracked.
  /// - Parameter ino: The backing inode number.
  public func contains(ino: UInt64) -> Bool {
    fileIndex[ino] != nil
  }

  /// A snapshot of a tracked file, or nil if it is not tracked.
  /// - Parameter ino: The backing inode number.
  public func entry(ino: UInt64) -> Entry? {
    guard let slot = fileIndex[ino] else { return nil }
    let file = files[Int(slot)]
    return Entry(
      domain: StorageDomain(rawValue: file.domain)!, bytes: file.bytes,
      urgency: PurgeUrgency(rawValue: file.urgency)!, lastUse: file.lastUse,
      openCount: Int(file.openCount), parent: parent(slot: file.parent, domain: file.domain, container: file.container),
      name: name(offset: file.nameOffset, length: file.nameLength), container: ContainerNumber(rawValue: file.container)
    )
  }
}
