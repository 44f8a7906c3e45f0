/// The sandbox's byte quota: capacity and usage per domain (docs/reference.md#quota-and-purging), and on a device per
/// container too (one capacity for all of them).
///
/// A value type: the filesystem keeps one inside its `Mutex` next to the `PurgeCatalog`
/// and updates it with `charge(domain:delta:)` as allocations change. Usage is allocated
/// bytes, as `du` counts them (`st_blocks * 512`).
///
/// Purgeable bytes are not stored here (the `PurgeCatalog` owns them); the available
/// capacities take them as arguments, so the two never disagree.
public struct QuotaLedger: Hashable, Sendable {
  /// The sandbox's capacity in bytes.
  public var capacity: Int64
  /// Allocated bytes per `StorageDomain`, indexed by raw value.
  private var usageByDomain: [Int64]
  /// Allocated bytes per container and domain, from `container * domains + domain`.
  private var usageByArea: [Int64]

  /// The number of domains, the stride of ``usageByArea``.
  private static let domains = StorageDomain.allCases.count

  /// Creates a ledger with no usage.
  /// - Parameter capacity: The capacity in bytes, ≥ 0.
  public init(capacity: Int64) {
    precondition(capacity >= 0, "QuotaLedger: negative capacity \(capacity)")
    self.capacity = capacity
    self.usageByDomain = Array(repeating: 0, count: Self.domains)
    self.usageByArea = usageByDomain
  }

  /// The allocated bytes in one domain.
  /// - Parameter domain: The domain.
  public func usage(_ domain: StorageDomain) -> Int64 {
    usageByDomain[Int(domain.rawValue)]
  }

  /// The allocated bytes in one domain of one container.
  /// - Parameter area: The container and domain.
  public func usage(_ area: StorageArea) -> Int64 {
    let index = Int(area.container.rawValue) * Self.domains + Int(area.domain.rawValue)
    return index < usageByArea.count ? usageByArea[index] : 0
  }

  /// The allocated bytes of one container, all domains.
  /// - Parameter container: The container.
  public func usage(of container: ContainerNumber) -> Int64 {
    StorageDomain.allCases.reduce(0) { $0 + usage(StorageArea(container, $1)) }
  }

  /// The allocated bytes in all domains.
  public var used: Int64 { usageByDomain.reduce(0, +) }

  /// The bytes not allocated: `capacity - used`, or 0 when usage exceeds the capacity (as
  /// after lowering the capacity on a full sandbox).
  public var free: Int64 { max(0, capacity - used) }

  /// Records a change of allocated bytes in a domain.
  /// - Parameters:
  ///   - domain: Where the allocation changed.
  ///   - delta: The change in bytes (negative when space is released).
  ///
  /// Usage never goes below zero: a release larger than the usage (the backing
  /// filesystem allocated metadata the caller had not measured yet) leaves zero. The
  /// filesystem re-derives usage from a scan at every mount.
  public mutating func charge(domain: StorageDomain, delta: Int64) {
    charge(StorageArea(domain), delta: delta)
  }

  /// Records a change of allocated bytes in a domain of a container (usage never goes
  /// below zero, as with ``charge(domain:delta:)``).
  /// - Parameters:
  ///   - area: The container and domain where the allocation changed.
  ///   - delta: The change in bytes (negative when space is released).
  public mutating func charge(_ area: StorageArea, delta: Int64) {
    let domainIndex = Int(area.domain.rawValue)
    usageByDomain[domainIndex] = max(0, usageByDomain[domainIndex] + delta)
    let index = Int(area.container.rawValue) * Self.domains + domainIndex
    if index >= usageByArea.count {
      usageByArea.append(
        contentsOf: repeatElement(0, count: (Int(area.container.rawValue) + 1) * Self.domains - usageByArea.count))
    }
    usageByArea[index] = max(0, usageByArea[index] + delta)
  }

  /// The bytes still missing for an allocation: `max(0, need - free)`. Purging this many
  /// bytes (or more) lets it fit.
  /// - Parameter need: The bytes the allocation needs.
  public func shortfall(for need: Int64) -> Int64 {
    max(0, need - free)
  }

  /// The capacity available for important resources, like Apple's
  /// `volumeAvailableCapacityForImportantUsage`: free bytes plus everything that could be
  /// purged now (`tmp` and `caches`, files without an open handle).
  /// - Parameter purgeable: `PurgeCatalog.totalPurgeableBytes`.
  public func importantAvailableCapacity(purgeable: Int64) -> Int64 {
    free + max(0, purgeable)
  }

  /// The capacity available for opportunistic (non-essential) resources, like Apple's
  /// `volumeAvailableCapacityForOpportunisticUsage`, which is never more than the important
  /// capacity.
  ///
  /// Rule: free bytes plus only what could be purged from `tmp` now. Storing something
  /// non-essential should not cost the app its caches, so purgeable `caches` bytes do not
  /// count; `tmp` is scratch space purged first anyway. Never above
  /// `importantAvailableCapacity(purgeable:)` for the same catalog.
  /// - Parameter purgeableTmp: `PurgeCatalog.purgeableBytes(domain: .tmp)`.
  public func opportunisticAvailableCapacity(purgeableTmp: Int64) -> Int64 {
    free + max(0, purgeableTmp)
  }
}
