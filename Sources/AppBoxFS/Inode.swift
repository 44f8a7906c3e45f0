import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Identifies a backing inode: device and inode number.
struct BackingKey: Hashable, Sendable {
  let device: UInt64
  let inode: UInt64

  init(_ st: stat) {
    device = UInt64(st.st_dev)
    inode = UInt64(st.st_ino)
  }

  init(device: UInt64, inode: UInt64) {
    self.device = device
    self.inode = inode
  }
}

/// One node the kernel knows: an `Linux.openPath` descriptor on its backing inode, through which
/// every operation on it goes (no path is ever resolved again).
final class Inode: Sendable {
  /// The id the kernel knows this inode by: opaque, never reused (see ``InodeTable``).
  let node: NodeID
  /// `Linux.openPath | O_NOFOLLOW` descriptor of the backing inode, closed on deinit.
  let fd: Int32
  /// The backing inode.
  let key: BackingKey
  /// `S_IFMT` bits; a backing inode never changes type.
  let fileType: mode_t
  /// Which fixed directory of its container's layout this is, if any.
  let fixed: SandboxLayout.FixedDirectory?
  /// What the layout says of names in this directory (``SandboxLayout/Parent``): a
  /// container's root or Library, one of a device's own directories, or the user's.
  let layout: SandboxLayout.Parent
  /// The container this inode is in: fixed for its life, since nothing moves or links
  /// between containers (EXDEV).
  let container: ContainerNumber
  /// Whether this is a container's metadata file, which programs may read but not change.
  let isContainerMetadata: Bool
  /// Lookups the kernel holds; changed only under ``InodeTable``'s lock.
  let lookups: Atomic<UInt64>
  /// Open file handles on this inode; for a regular file in Caches or tmp, changed only
  /// under the books' lock (``StorageState/pin(_:)``), which the catalog's count follows.
  let openHandles: Atomic<Int32>
  /// The storage domain (`StorageDomain` raw value); a file's changes when it is renamed
  /// into another domain.
  private let domainValue: Atomic<UInt8>
  /// The Data Protection class (index in `ProtectionClass.allCases`), or `unknownClass`
  /// until first needed.
  let protectionValue = Atomic<UInt8>(Inode.unknownClass)
  /// Allocated bytes as last charged to the quota (`st_blocks * 512`).
  let allocated: Mutex<Int64>
  /// What ``allocated`` started at: for a node taken again from its retained record, what
  /// the books held for the file (``InodeTable/Retained/charged``); else the allocation
  /// its lookup read, which the books hold for a file they counted before (found at mount,
  /// or measured as an earlier node), but not yet for one just created through the mount
  /// (``SandboxFilesystem/created(_:in:protection:reserved:room:openFD:)``).
  let initialCharge: Int64
  /// Set (under ``allocated``'s lock) by the node's first measurement: from then on, the
  /// status its lookup read is no measure of the file.
  let measuredOnce = Atomic<Bool>(false)
  /// Set (under `allocated`'s lock) while the file has no name left but open handles: its
  /// blocks stay allocated, and charged, until the last handle is released (a program may
  /// go on writing through it), as the quota's measurement decides.
  let chargedUnlinked = Atomic<Bool>(false)
  /// The file's size when its allocation was last measured (stored under `allocated`'s
  /// lock): with the allocation it tells whether the file may have holes below its end
  /// (``SandboxFilesystem/growthEstimate(_:offset:count:)``).
  let measuredSize: Atomic<Int64>
  /// Set when data was written through the daemon: until its last handle is released, the
  /// backing filesystem may still allocate for it (at writeback), so releases measure it.
  let written = Atomic<Bool>(false)
  /// Set once the file had holes below its end when measured before or after a change, or
  /// was fallocated: its backing filesystem may then change its extent tree when it
  /// writes the file back (ext4: an extent-tree block allocated, or freed when unwritten
  /// extents merge), so a release that follows writes waits for that write-back before it
  /// measures (``SandboxFilesystem/release(_:node:handle:)``). A file written only in
  /// order, without holes, is left to the kernel's flusher.
  let mayReshapeAtWriteBack = Atomic<Bool>(false)
  /// Unix second of the last use through the mount, to touch the purge catalog at most
  /// once a second per file.
  let lastTouch = Atomic<UInt32>(0)
  /// Set before the first read the daemon serves on a handle that is not passthrough:
  /// from then on the kernel's page cache of the file may hold pages the daemon read, which
  /// a direct write makes stale (``SandboxFilesystem/write(_:node:handle:data:offset:)``).
  /// Only page-cache fills (buffered reads, readahead, faults of a mapping) come as such
  /// reads; a file written past the cache and never read that way needs no dropping.
  let mayHaveCachedPages = Atomic<Bool>(false)
  /// Set when a purge removed the file: its getattr and open answer ESTALE where the
  /// kernel still has it cached (until the kernel's entry is invalidated), so the kernel
  /// looks the name up again.
  let purged = Atomic<Bool>(false)
  /// Set when a removal through the mount took the item's last name (``SandboxFilesystem/untrack(_:name:in:held:)``,
  /// under `allocated`'s lock): its link count is 0 for good (a file unlinked to no links
  /// cannot be linked again), so its forget retains no handle and, once its charge has gone
  /// back (at the removal, or at its last release: not ``chargedUnlinked``), measures
  /// nothing, and reads no status for either.
  let unlinked = Atomic<Bool>(false)
  /// Set when this file re-created a name a purge had removed: its last release adds
  /// what it then holds to ``PurgeCost``'s bytes written again.
  let recreatesPurged = Atomic<Bool>(false)

  /// How the kernel does I/O on the open handles of this file; see ``IOMode``.
  let ioMode = Mutex(IOMode())
  /// Set while writers hold handles through the kernel's writeback cache although the
  /// file's class can refuse handle I/O (it was changed to A or CX while they were open):
  /// the kernel is then never let keep its attributes, so that it asks for them, handle
  /// in hand, before each write through such a handle, and that question is refused while
  /// the class is (``SandboxFilesystem/getattr(_:node:handle:)``). Changed under `ioMode`'s lock.
  let writesGated = Atomic<Bool>(false)
  /// Set while a lock transition has the kernel write back and drop this file's cached
  /// pages: the write-back requests it sends meanwhile carry data written before the
  /// transition, and are stored whatever the new state says.
  let flushingForLock = Atomic<Bool>(false)

  /// The directory and name the kernel first looked this inode up by (a node found by
  /// file handle has none until its first lookup by name): where to ask the kernel to drop
  /// it (``SandboxFilesystem/dropKernelCaches(sparing:)``). A later rename makes it stale,
  /// which only makes that request miss.
  let origin: Mutex<(parent: NodeID, name: [UInt8])>
  /// Whether ``origin`` has a name: read without its lock on every lookup.
  let named: Atomic<Bool>

  static let unknownClass: UInt8 = 0xFF

  /// Gives a node found by file handle the name a later lookup found it by.
  func found(in parent: NodeID, as name: FileName) {
    guard !name.isEmpty, !named.load(ordering: .relaxed) else { return }
    origin.withLock { $0 = (parent, name.bytes) }
    named.store(true, ordering: .relaxed)
  }

  init(
    node: NodeID, fd: Int32, attributes: stat, place: Place, lookups: UInt64,
    origin: (parent: NodeID, name: [UInt8]) = (.root, []), charged: Int64? = nil
  ) {
    self.node = node
    self.origin = Mutex(origin)
    self.named = Atomic(!origin.name.isEmpty)
    self.fd = fd
    self.key = BackingKey(attributes)
    self.fileType = attributes.st_mode & S_IFMT
    self.fixed = place.fixed
    self.layout = place.layout
    self.container = place.container
    self.isContainerMetadata = place.isContainerMetadata
    self.lookups = Atomic(lookups)
    self.openHandles = Atomic(0)
    self.domainValue = Atomic(place.domain.rawValue)
    self.initialCharge = charged ?? Int64(attributes.st_blocks) * 512
    self.allocated = Mutex(initialCharge)
    self.measuredSize = Atomic(Int64(attributes.st_size))
  }

  /// The storage domain this inode belongs to.
  var domain: StorageDomain {
    get { StorageDomain(rawValue: domainValue.load(ordering: .relaxed))! }
    set { domainValue.store(newValue.rawValue, ordering: .relaxed) }
  }

  /// The container and domain the quota charges this inode's allocation to.
  var area: StorageArea { StorageArea(container, domain) }

  /// Whether this is a container's root (a plain mount's root too), which shows the
  /// device's read-only attributes.
  var isContainerRoot: Bool { layout == .root || layout == .groupRoot }

  /// Where an inode stands in the layout, decided when it is looked up
  /// (``SandboxFilesystem/place(of:in:isDirectory:)``).
  struct Place: Sendable {
    var fixed: SandboxLayout.FixedDirectory? = nil
    var layout: SandboxLayout.Parent = .other
    var domain: StorageDomain
    var container: ContainerNumber = .top
    var isContainerMetadata = false
  }

  /// The cached protection class, if loaded.
  var cachedProtection: ProtectionClass? {
    get {
      let value = protectionValue.load(ordering: .relaxed)
      return value == Self.unknownClass ? nil : ProtectionClass.allCases[Int(value)]
    }
    set {
      let value = newValue.map { UInt8(ProtectionClass.allCases.firstIndex(of: $0)!) } ?? Self.unknownClass
      protectionValue.store(value, ordering: .relaxed)
    }
  }

  var isRegularFile: Bool { fileType == S_IFREG }

  deinit { Sys.close(fd) }

  var isDirectory: Bool { fileType == S_IFDIR }
  var isSymlink: Bool { fileType == S_IFLNK }
}

/// How the kernel does I/O on a file's open handles. It refuses (EIO) to mix the two ways
/// on one inode: while handles through its page cache are open, a new one must be one too;
/// while passthrough handles are open, a new one must be passthrough on the same backing
/// file, whatever its access mode.
struct IOMode: Sendable {
  /// Open handles whose I/O goes through the daemon: through the kernel's page cache,
  /// or direct (which the kernel caches too once such a file is mapped).
  var cachedHandles = 0
  /// Of those, writable handles through the kernel's writeback cache (``HandleKind/writeback``).
  var cachedWriters = 0
  /// Open handles whose I/O the kernel serves from `backing`.
  var passthroughHandles = 0
  /// The registered backing file while passthrough handles are open.
  var backing: BackingID?
  /// Changes under way that may leave holes below the file's end
  /// (``SandboxFilesystem/changingExtent(_:_:)``): no passthrough is registered on the
  /// file meanwhile, so that a registration sees the holes they leave.
  var holesInMaking = 0
}
