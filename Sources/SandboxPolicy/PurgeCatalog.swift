/// The index of every purgeable file (below `Library/Caches` and `tmp`) and of the
/// directories below those two domain roots, which decides what to purge and in what order.
///
/// Files and directories are keyed by their *backing* inode numbers (`st_ino` on the backing
/// filesystem), so renames on the mount never invalidate a key.
///
/// ## Containers
/// On a device (several containers on one mount) every file and directory also records
/// its container (``ContainerNumber``); the lists are the device's, not a container's, so
/// victims come from every container in one order (tmp of every app first, then every
/// Caches), never "the writer's container first". Bytes are also counted per container.
///
/// ## Ordering
/// Files live in one intrusive doubly-linked LRU list per (domain, urgency) bucket. Each list
/// is ordered by `lastUse`, ties in the order the files were added or touched; the head is
/// the least recently used. Victims are taken `tmp` before `caches`; within a domain
/// `high`, `medium`, `low`, `none` urgency; within a bucket least recently used first.
/// Files with an open handle are never chosen.
///
/// ## Time
/// `lastUse` is a `UInt32` count of seconds since an epoch the caller chooses; AppBox uses
/// Unix time (which fits a `UInt32` until 2106). Only the order of values matters here.
/// `touch` and `addFile` are O(1) when the time given is at least the newest `lastUse` in the
/// file's bucket (the normal case); an older time walks back from the newest end to its
/// place. To load many files with unordered times (the mount-time index), call
/// `beginBulkLoad()`, add them, then `endBulkLoad()`, which sorts every list once.
///
/// ## Memory
/// No per-file objects, arrays or strings: one 48-byte slot per file in a contiguous array
/// (`Int32` links, a free list of removed slots), names in one byte arena (compacted when
/// more than half of it is garbage), and one `[UInt64: Int32]` dictionary from inode to slot.
/// About 100 bytes per file with 20-byte names; see `approximateMemoryBytes`.
///
/// ## Hard links and concurrency
/// A file is tracked under one name (a hard link's other names are the caller's concern).
/// The catalog is not thread-safe: the filesystem keeps it inside a `Mutex`. A precondition
/// failure means the caller's bookkeeping is wrong (for example adding an inode twice), which
/// is a bug that must not be papered over.
public final class PurgeCatalog {
  // MARK: - Storage

  /// One tracked file. 48 bytes of fields, 48-byte stride.
  struct FileSlot {
    /// The backing inode number.
    var ino: UInt64
    /// The file's size as the caller counts it (AppBox: allocated bytes).
    var bytes: Int64
    /// Where the name starts in `names`.
    var nameOffset: UInt32
    /// The last use time (see the type's documentation).
    var lastUse: UInt32
    /// The number of open handles.
    var openCount: UInt32
    /// The parent directory's slot, or -1 for the domain root.
    var parent: Int32
    /// The previous (less recently used) file in the bucket's list, or -1.
    var prev: Int32
    /// The next (more recently used) file in the bucket's list, or -1; for a free slot, the
    /// next free slot.
    var next: Int32
    /// The name's length in bytes.
    var nameLength: UInt16
    /// The `StorageDomain` raw value, or `PurgeCatalog.freeMarker` for a free slot.
    var domain: UInt8
    /// The `PurgeUrgency` raw value.
    var urgency: UInt8
    /// The ``ContainerNumber``.
    var container: UInt32
  }

  /// One tracked directory below a purgeable domain root.
  struct DirectorySlot {
    /// The backing inode number.
    var ino: UInt64
    /// Where the name starts in `names`.
    var nameOffset: UInt32
    /// The parent directory's slot, or -1 for the domain root.
    var parent: Int32
    /// The number of tracked files and directories directly inside.
    var childCount: UInt32
    /// The name's length in bytes.
    var nameLength: UInt16
    /// The `StorageDomain` raw value, or `PurgeCatalog.freeMarker` for a free slot.
    var domain: UInt8
    /// The ``ContainerNumber``.
    var container: UInt32
  }

  /// The `domain` value of a free slot.
  static let freeMarker: UInt8 = .max
  /// The number of LRU buckets: two purgeable domains times four urgencies.
  static let bucketCount = 8

  /// File slots; free ones are chained through `next` from `freeFileHead`.
  var files: [FileSlot] = []
  /// The first free file slot, or -1.
  var freeFileHead: Int32 = -1
  /// Inode number to file slot.
  var fileIndex: [UInt64: Int32] = [:]
  /// Directory slots.
  var directories: [DirectorySlot] = []
  /// Free directory slots.
  var freeDirectorySlots: [Int32] = []
  /// Inode number to directory slot.
  var directoryIndex: [UInt64: Int32] = [:]
  /// The name arena: every live name is `names[offset..<offset + length]`.
  var names: [UInt8] = []
  /// Bytes in `names` that belong to no live name.
  var garbageNameBytes = 0
  /// Garbage below this many bytes never triggers a compaction.
  let compactionThreshold: Int
  /// The least recently used file of each bucket, or -1.
  var heads = [Int32](repeating: -1, count: PurgeCatalog.bucketCount)
  /// The most recently used file of each bucket, or -1.
  var tails = [Int32](repeating: -1, count: PurgeCatalog.bucketCount)
  /// Bytes of all tracked files, by purge rank (0 `tmp`, 1 `caches`).
  var trackedBytesByRank: [Int64] = [0, 0]
  /// Bytes of tracked files with an open handle, by purge rank.
  var openBytesByRank: [Int64] = [0, 0]
  /// Per container (four entries each, from `container * 4`): tracked bytes of `tmp` and
  /// `caches`, then open bytes of `tmp` and `caches`.
  var bytesByContainer: [Int64] = [0, 0, 0, 0]
  /// Each container's root directory below the mount root (none for ``ContainerNumber/top``
  /// on a plain mount), which the paths of ``path(ofFile:)`` start with.
  public var containerPaths: [ContainerNumber: [[UInt8]]] = [:]
  /// Whether `beginBulkLoad()` is in effect.
  var isBulkLoading = false
  /// The order of victims within a domain and urgency (default LRU; ``PurgePolicy``).
  public var policy = PurgePolicy.lru

  /// How many times the name arena has been compacted.
  public internal(set) var nameCompactions = 0

  /// Creates an empty catalog.
  /// - Parameter compactionThreshold: The name arena is compacted when its garbage exceeds
  ///   both half its size and this many bytes (default 64 KiB).
  public init(compactionThreshold: Int = 64 * 1024) {
    self.compactionThreshold = compactionThreshold
  }

  /// Reserves storage for a known number of files, as the mount-time index can.
  /// - Parameters:
  ///   - files: The number of files to expect.
  ///   - nameBytes: The total length of their names.
  public func reserveCapacity(files: Int, nameBytes: Int) {
    self.files.reserveCapacity(files)
    fileIndex.reserveCapacity(files)
    names.reserveCapacity(nameBytes)
  }

  // MARK: - Counts

  /// The number of tracked files.
  public var count: Int { fileIndex.count }

  /// The number of tracked directories.
  public var directoryCount: Int { directoryIndex.count }

  /// The bytes of a domain's tracked files that could be purged now (files with an open
  /// handle are left out).
  /// - Parameter domain: `caches` or `tmp`; other domains have none.
  public func purgeableBytes(domain: StorageDomain) -> Int64 {
    guard let rank = domain.purgeRank else { return 0 }
    return trackedBytesByRank[rank] - openBytesByRank[rank]
  }

  /// The bytes of all tracked files, open or not, in a domain.
  /// - Parameter domain: `caches` or `tmp`; other domains have none.
  public func trackedBytes(domain: StorageDomain) -> Int64 {
    guard let rank = domain.purgeRank else { return 0 }
    return trackedBytesByRank[rank]
  }

  /// The bytes of one container's files in a domain that could be purged now.
  /// - Parameters:
  ///   - domain: `caches` or `tmp`; other domains have none.
  ///   - container: The container.
  public func purgeableBytes(domain: StorageDomain, container: ContainerNumber) -> Int64 {
    guard let rank = domain.purgeRank else { return 0 }
    let base = Int(container.rawValue) * 4
    guard base + 3 < bytesByContainer.count else { return 0 }
    return bytesByContainer[base + rank] - bytesByContainer[base + 2 + rank]
  }

  /// The bytes of all of one container's tracked files, open or not, in a domain.
  /// - Parameters:
  ///   - domain: `caches` or `tmp`; other domains have none.
  ///   - container: The container.
  public func trackedBytes(domain: StorageDomain, container: ContainerNumber) -> Int64 {
    guard let rank = domain.purgeRank else { return 0 }
    let base = Int(container.rawValue) * 4
    guard base + 3 < bytesByContainer.count else { return 0 }
    return bytesByContainer[base + rank]
  }

  /// The bytes that could be purged now in `tmp` and `caches` together.
  public var totalPurgeableBytes: Int64 {
    purgeableBytes(domain: .tmp) + purgeableBytes(domain: .caches)
  }

  /// The capacity in bytes of the internal storage (slot arrays, name arena, dictionaries),
  /// for reporting memory per tracked file. Dictionary sizes are estimated from their
  /// capacity (power-of-two buckets at most 3/4 full).
  public var approximateMemoryBytes: Int {
    func dictionaryBytes<K, V>(_ dictionary: [K: V]) -> Int {
      guard dictionary.capacity > 0 else { return 0 }
      var buckets = 1
      while buckets * 3 / 4 < dictionary.capacity { buckets <<= 1 }
      return buckets * (MemoryLayout<K>.stride + MemoryLayout<V>.stride) + buckets / 8
    }
    return files.capacity * MemoryLayout<FileSlot>.stride
      + directories.capacity * MemoryLayout<DirectorySlot>.stride
      + freeDirectorySlots.capacity * MemoryLayout<Int32>.stride
      + names.capacity
      + dictionaryBytes(fileIndex)
      + dictionaryBytes(directoryIndex)
      + (heads.capacity + tails.capacity) * MemoryLayout<Int32>.stride
      + bytesByContainer.capacity * MemoryLayout<Int64>.stride
  }

  // MARK: - Slot helpers

  /// The purge rank (0 `tmp`, 1 `caches`) of a stored domain raw value.
  @inline(__always)
  static func rank(ofDomain raw: UInt8) -> Int {
    raw == StorageDomain.tmp.rawValue ? 0 : 1
  }

  /// The LRU bucket of a file slot.
  @inline(__always)
  func bucket(ofFile slot: Int32) -> Int {
    let file = files[Int(slot)]
    return Self.rank(ofDomain: file.domain) * 4 + Int(file.urgency)
  }

  /// The bucket of a domain and urgency.
  @inline(__always)
  static func bucket(rank: Int, urgency: PurgeUrgency) -> Int {
    rank * 4 + Int(urgency.rawValue)
  }

  /// The slot, domain and container of a parent, checking that it exists and is purgeable.
  func resolve(_ parent: Parent) -> (slot: Int32, domain: UInt8, container: UInt32) {
    switch parent {
    case .root(let domain, let container):
      precondition(domain.isPurgeable, "PurgeCatalog tracks only caches and tmp, not \(domain)")
      return (-1, domain.rawValue, container.rawValue)
    case .directory(let ino):
      guard let slot = directoryIndex[ino] else {
        preconditionFailure("PurgeCatalog: parent directory \(ino) is not registered")
      }
      return (slot, directories[Int(slot)].domain, directories[Int(slot)].container)
    }
  }

  /// The public form of a stored parent.
  func parent(slot: Int32, domain: UInt8, container: UInt32) -> Parent {
    if slot < 0 { return .root(StorageDomain(rawValue: domain)!, container: ContainerNumber(rawValue: container)) }
    return .directory(directories[Int(slot)].ino)
  }

  /// Adds `delta` to the tracked (or, `open`, the open) bytes of a purge rank, overall and
  /// for one container.
  @inline(__always)
  func count(_ delta: Int64, rank: Int, container: UInt32, open: Bool) {
    if open { openBytesByRank[rank] += delta } else { trackedBytesByRank[rank] += delta }
    let index = Int(container) * 4 + (open ? 2 : 0) + rank
    if index >= bytesByContainer.count {
      bytesByContainer.append(contentsOf: repeatElement(0, count: (Int(container) + 1) * 4 - bytesByContainer.count))
    }
    bytesByContainer[index] += delta
  }

  /// Adds one child to a directory slot's count (nothing for a domain root).
  func adjustChildCount(_ slot: Int32, by delta: Int32) {
    guard slot >= 0 else { return }
    let old = directories[Int(slot)].childCount
    precondition(delta > 0 || old > 0, "PurgeCatalog: directory child count underflow")
    directories[Int(slot)].childCount = UInt32(Int64(old) + Int64(delta))
  }
}
