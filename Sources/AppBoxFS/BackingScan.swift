import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

/// How far the mount-time index has got.
public struct IndexProgress: Sendable {
  /// Entries (files, directories, symlinks…) seen so far.
  public var entries: Int
  /// Their allocated bytes, as `du` counts them.
  public var bytes: Int64
  /// Whether the index is complete (the last report).
  public var isComplete: Bool
}

/// The mount-time walk of the backing tree: usage per domain (and, on a device, per
/// container) as `du` counts it (hard links once), and the catalog of every file and
/// directory in Caches and tmp, every container's in one. Usage is therefore exact after
/// any crash: nothing is trusted from an earlier run.
struct BackingScan {
  private(set) var ledger: QuotaLedger
  let catalog = PurgeCatalog()
  /// Backing inode numbers of multiply-linked files already counted.
  private var countedLinks = Set<UInt64>()
  /// Told every ``progressInterval`` entries, and once at the end.
  private let progress: (@Sendable (IndexProgress) -> Void)?
  private var entries = 0
  static let progressInterval = 4096

  /// Walks the tree under `rootFD`, telling `progress` how far it got.
  static func run(
    rootFD: Int32, layout: SandboxLayout.Parent = .root, device: DeviceContainers? = nil, capacity: Int64,
    progress: (@Sendable (IndexProgress) -> Void)? = nil
  ) throws(Errno) -> (QuotaLedger, PurgeCatalog) {
    var scan = BackingScan(ledger: QuotaLedger(capacity: capacity), progress: progress)
    scan.catalog.beginBulkLoad()
    try scan.walk(rootFD: rootFD, layout: layout, device: device)
    scan.catalog.endBulkLoad()
    progress?(IndexProgress(entries: scan.entries, bytes: scan.ledger.used, isComplete: true))
    return (scan.ledger, scan.catalog)
  }

  private init(ledger: QuotaLedger, progress: (@Sendable (IndexProgress) -> Void)?) {
    self.ledger = ledger
    self.progress = progress
  }

  /// Where a directory being listed stands.
  private struct Level {
    /// Where the directory stands in the layout.
    let place: Inode.Place
    /// Where its entries sit in the catalog (nil outside Caches and tmp).
    let catalogParent: PurgeCatalog.Parent?
  }

  private mutating func walk(rootFD: Int32, layout: SandboxLayout.Parent, device: DeviceContainers?) throws(Errno) {
    let rootStat = try Sys.fstat(rootFD)
    ledger.charge(domain: .root, delta: Int64(rootStat.st_blocks) * 512)
    let urgencyName = Array(AppBoxAttribute.purgeUrgency.name.utf8CString)
    // Not one descriptor per level: a tree deeper than the descriptor limit is indexed too.
    var stack = DirectoryLevels<Level>(reopenFlags: O_RDONLY | Linux.openNoAccessTime)
    try stack.enter(
      try Sys.reopen(rootFD, flags: O_RDONLY | O_DIRECTORY | O_CLOEXEC | Linux.openNoAccessTime),
      payload: Level(place: Inode.Place(layout: layout, domain: .root), catalogParent: nil))
    while let level = stack.innermost?.payload {
      guard let item = try stack.next() else {
        try stack.leave()
        continue
      }
      let directoryFD = stack.fd
      if isDotOrDotDot(item.name) { continue }
      entries += 1
      if let progress, entries % Self.progressInterval == 0 {
        progress(IndexProgress(entries: entries, bytes: ledger.used, isComplete: false))
      }
      let st: stat
      do throws(Errno) {
        st = try Sys.fstatat(directoryFD, item.name, AT_SYMLINK_NOFOLLOW)
      } catch  where error == .noEntry {
        continue
      }
      let type = st.st_mode & S_IFMT
      let place: Inode.Place
      do throws(Errno) {
        place =
          level.place.layout == .other
          ? level.place
          : try SandboxFilesystem.place(
            of: FileName(item.name), in: level.place, isDirectory: type == S_IFDIR, device: device)
      } catch  where error == .noEntry {
        continue  // a staging entry (DeviceBacking removed them before the mount)
      }
      let domain = place.domain
      let bytes = Int64(st.st_blocks) * 512
      if type != S_IFDIR && st.st_nlink > 1 {
        guard countedLinks.insert(UInt64(st.st_ino)).inserted else { continue }
      }
      ledger.charge(StorageArea(place.container, domain), delta: bytes)
      if type == S_IFDIR {
        var catalogParent: PurgeCatalog.Parent? = nil
        if domain.isPurgeable {
          if place.fixed != nil {
            catalogParent = .root(domain, container: place.container)
          } else if let parent = level.catalogParent {
            catalog.registerDirectory(ino: UInt64(st.st_ino), parent: parent, name: FileName(item.name).bytes)
            catalogParent = .directory(UInt64(st.st_ino))
          }
        }
        let fd = try Sys.openat(
          directoryFD, item.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | Linux.openNoAccessTime)
        try stack.enter(
          fd,
          payload: Level(
            place: Inode.Place(layout: place.layout, domain: domain, container: place.container),
            catalogParent: catalogParent))
      } else if type == S_IFREG, st.st_nlink == 1, let parent = level.catalogParent {
        // No urgency, or one that names none: no urgency (purged after files with one,
        // never earlier than it should be).
        let urgency =
          urgencyName.withUnsafeBufferPointer { name in
            Xattr.value(in: directoryFD, entry: item.name, name.baseAddress!)
          }.flatMap { try? PurgeUrgency.parse(attributeValue: $0) } ?? PurgeUrgency.none
        let lastUse = max(st.st_atim.tv_sec, st.st_mtim.tv_sec)
        catalog.addFile(
          ino: UInt64(st.st_ino), parent: parent, name: FileName(item.name).bytes, bytes: bytes, urgency: urgency,
          lastUse: UInt32(clamping: lastUse))
      }
    }
  }
}
