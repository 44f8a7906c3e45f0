extension PurgeCatalog {
  // MARK: - Choosing victims

  /// Chooses files to purge to free at least a number of bytes, in purge order: `tmp`
  /// before `caches`; within a domain `high`, `medium`, `low`, `none` urgency; within those
  /// least recently used first (``policy``: or oldest first, or largest first). Files with
  /// an open handle are skipped, and so are those in `sparing`. Walks the LRU lists from
  /// their heads and stops as soon as the chosen files add up to `bytes` (it never scans
  /// files it does not need). Nothing is removed; if every purgeable file together is not
  /// enough, all of them are returned.
  /// - Parameters:
  ///   - bytes: The number of bytes to free; nothing is chosen for 0 or less.
  ///   - sparing: Files not to choose (by inode number): those a purge already tried.
  /// - Returns: The victims, in the order to purge them.
  public func chooseVictims(toFree bytes: Int64, sparing: Set<UInt64> = []) -> [Victim] {
    guard bytes > 0 else { return [] }
    var chosen: [Victim] = []
    var freed: Int64 = 0
    if policy == .largest {
      // Every candidate of a domain, largest first: O(n log n) per purge (an experiment's
      // option; LRU and FIFO stop at the bytes needed).
      for domain in StorageDomain.purgeOrder where freed < bytes {
        for victim in Self.ordered(victims(inDomain: domain), by: policy)
        where freed < bytes && !sparing.contains(victim.ino) {
          chosen.append(victim)
          freed += victim.bytes
        }
      }
      return chosen
    }
    for domain in StorageDomain.purgeOrder {
      collect(domain: domain, into: &chosen) { file in
        guard freed < bytes else { return .stop }
        if sparing.contains(file.ino) { return .skip }
        freed += file.bytes
        return .take
      }
      if freed >= bytes { break }
    }
    return chosen
  }

  /// Every file of a domain that could be purged now (not open), in purge order.
  /// - Parameter domain: `caches` or `tmp`; other domains have none.
  /// - Returns: The victims, in the order to purge them.
  public func victims(inDomain domain: StorageDomain) -> [Victim] {
    var chosen: [Victim] = []
    collect(domain: domain, into: &chosen) { _ in .take }
    return chosen
  }

  /// Every file not used since a time that could be purged now (not open), in purge order.
  /// Each list is walked only as far as its files are older than `time`.
  /// - Parameters:
  ///   - time: Files with `lastUse` strictly before this are chosen.
  ///   - domain: `caches` or `tmp`, or nil for both (`tmp` first).
  /// - Returns: The victims, in the order to purge them.
  public func victims(olderThan time: UInt32, domain: StorageDomain? = nil) -> [Victim] {
    var chosen: [Victim] = []
    for candidate in domain.map({ [$0] }) ?? StorageDomain.purgeOrder {
      collect(domain: candidate, into: &chosen) { file in
        file.lastUse < time ? .take : .nextList
      }
    }
    return chosen
  }

  /// What `collect` does with a file that is not open.
  enum Decision {
    /// Choose it and go on.
    case take
    /// Leave it and go on.
    case skip
    /// Skip the rest of this list.
    case nextList
    /// Stop collecting.
    case stop
  }

  /// Walks a domain's lists in purge order, asking `decide` about every file without an
  /// open handle.
  func collect(
    domain: StorageDomain, into chosen: inout [Victim], _ decide: (FileSlot) -> Decision
  ) {
    precondition(!isBulkLoading, "PurgeCatalog: victims chosen during a bulk load")
    guard let rank = domain.purgeRank else { return }
    for urgency in PurgeUrgency.purgeOrder {
      var slot = heads[Self.bucket(rank: rank, urgency: urgency)]
      walk: while slot >= 0 {
        let file = files[Int(slot)]
        slot = file.next
        if file.openCount > 0 { continue }
        switch decide(file) {
        case .take:
          chosen.append(
            Victim(
              ino: file.ino, parent: parent(slot: file.parent, domain: file.domain, container: file.container),
              name: name(offset: file.nameOffset, length: file.nameLength), bytes: file.bytes,
              domain: domain, urgency: urgency, lastUse: file.lastUse,
              container: ContainerNumber(rawValue: file.container)))
        case .skip:
          continue
        case .nextList:
          break walk
        case .stop:
          return
        }
      }
    }
  }
}
