// The intrusive LRU lists, one per (domain, urgency) bucket, ordered by `lastUse` with ties
// in insertion order; head = least recently used.

extension PurgeCatalog {
  /// Unlinks a file slot from its bucket's list.
  func unlink(_ slot: Int32, bucket: Int) {
    let prev = files[Int(slot)].prev
    let next = files[Int(slot)].next
    if prev >= 0 { files[Int(prev)].next = next } else { heads[bucket] = next }
    if next >= 0 { files[Int(next)].prev = prev } else { tails[bucket] = prev }
    files[Int(slot)].prev = -1
    files[Int(slot)].next = -1
  }

  /// Links a file slot into a bucket after `after` (or at the head if `after` is -1).
  func link(_ slot: Int32, bucket: Int, after: Int32) {
    let next = after >= 0 ? files[Int(after)].next : heads[bucket]
    files[Int(slot)].prev = after
    files[Int(slot)].next = next
    if after >= 0 { files[Int(after)].next = slot } else { heads[bucket] = slot }
    if next >= 0 { files[Int(next)].prev = slot } else { tails[bucket] = slot }
  }

  /// Links a file slot into a bucket at its `lastUse` place: after every file with the same
  /// or an older `lastUse`. O(1) when it is the newest; during a bulk load it is appended
  /// and `endBulkLoad()` sorts.
  func linkOrdered(_ slot: Int32, bucket: Int) {
    var after = tails[bucket]
    if !isBulkLoading {
      let lastUse = files[Int(slot)].lastUse
      while after >= 0 && files[Int(after)].lastUse > lastUse {
        after = files[Int(after)].prev
      }
    }
    link(slot, bucket: bucket, after: after)
  }

  /// Re-sorts one bucket's list by `lastUse`, keeping the current order among equal times.
  func sortBucket(_ bucket: Int) {
    var order: [Int32] = []
    var slot = heads[bucket]
    while slot >= 0 {
      order.append(slot)
      slot = files[Int(slot)].next
    }
    guard order.count > 1 else { return }
    var keys = [UInt64](repeating: 0, count: order.count)
    for (position, slot) in order.enumerated() {
      keys[position] = UInt64(files[Int(slot)].lastUse) << 32 | UInt64(position)
    }
    keys.sort()
    var prev: Int32 = -1
    for key in keys {
      let slot = order[Int(key & 0xFFFF_FFFF)]
      files[Int(slot)].prev = prev
      if prev >= 0 { files[Int(prev)].next = slot } else { heads[bucket] = slot }
      prev = slot
    }
    files[Int(prev)].next = -1
    tails[bucket] = prev
  }

  /// Starts a bulk load: until `endBulkLoad()`, `addFile` and `touch` append to the newest
  /// end of the lists without ordering, and choosing victims is not allowed.
  public func beginBulkLoad() {
    precondition(!isBulkLoading, "PurgeCatalog: bulk load already in progress")
    isBulkLoading = true
  }

  /// Ends a bulk load: sorts every list by `lastUse` (ties in the order added), in
  /// O(n log n).
  public func endBulkLoad() {
    precondition(isBulkLoading, "PurgeCatalog: no bulk load in progress")
    isBulkLoading = false
    for bucket in 0..<Self.bucketCount { sortBucket(bucket) }
  }
}
