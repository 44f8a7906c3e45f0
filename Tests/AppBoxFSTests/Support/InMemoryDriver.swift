import FilesystemInterface
import Posix
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A driver without a kernel: no passthrough, and no other reader to hand the device to
/// (it counts how often a handler asked, as a long wait on a mount would); a writeback
/// cache when a test says the kernel agreed to one.
final class InMemoryDriver: FilesystemDriver {
  private let handOffs = Atomic<Int>(0)
  private let files: (any PassthroughFiles)?
  let writeCache: WriteCache?

  /// A driver without passthrough, or with `passthrough` standing in for the kernel's;
  /// with `writeCache`, as a kernel that agreed to cache writes.
  init(passthrough: (any PassthroughFiles)? = nil, writeCache: WriteCache? = nil) {
    files = passthrough
    self.writeCache = writeCache
  }

  var passthrough: any PassthroughFiles { files ?? NoPassthrough() }
  func handOff() { handOffs.add(1, ordering: .relaxed) }
  var busyPoll: (microseconds: UInt32, polled: UInt64, waited: UInt64) { (0, 0, 0) }
  var requestCounts: [(operation: String, count: UInt64)] { [] }
  var transport: TransportStatus { TransportStatus(inUse: .devFuse, requested: .devFuse) }

  /// How often handlers handed the device off so far.
  var handOffCount: Int { handOffs.load(ordering: .relaxed) }
}

/// Passthrough is never available outside a FUSE session.
struct NoPassthrough: PassthroughFiles {
  var isAvailable: Bool { false }
  func register(_ fd: Int32) -> BackingID? { nil }
  func unregister(_ id: BackingID) {}
}

/// Passthrough as a kernel that agreed to it: registrations get ids, and are counted.
final class RecordingPassthrough: PassthroughFiles {
  private let state = Mutex<(next: Int32, registered: Set<Int32>, total: Int)>((1, [], 0))

  var isAvailable: Bool { true }

  func register(_ fd: Int32) -> BackingID? {
    state.withLock { state in
      defer { state.next += 1 }
      state.registered.insert(state.next)
      state.total += 1
      return BackingID(rawValue: state.next)
    }
  }

  func unregister(_ id: BackingID) { state.withLock { _ = $0.registered.remove(id.rawValue) } }

  /// Registrations not dropped yet.
  var registered: Int { state.withLock { $0.registered.count } }

  /// Registrations ever made.
  var total: Int { state.withLock { $0.total } }
}

/// Records the kernel notifications the filesystem sends.
final class RecordingNotifier: KernelNotifier {
  /// One notification.
  enum Call: Equatable {
    case invalidateEntry(parent: NodeID, name: [UInt8])
    case delete(parent: NodeID, child: NodeID, name: [UInt8])
    case invalidateInode(NodeID)
    /// Attributes only (a negative offset).
    case invalidateAttributes(NodeID)
  }

  private let recorded = Mutex<[Call]>([])

  /// What was sent so far.
  var calls: [Call] { recorded.withLock { $0 } }

  /// The names that were invalidated or deleted, as strings.
  var names: [String] {
    calls.compactMap {
      switch $0 {
      case .invalidateEntry(_, let name), .delete(_, _, let name): String(decoding: name, as: UTF8.self)
      case .invalidateInode, .invalidateAttributes: nil
      }
    }
  }

  /// Whether entry invalidations wait (``holdInvalidations()``), and how many wait now.
  private let gate = Mutex((held: false, waiting: 0))
  private let gateChanged = Condition()

  /// From now on each entry invalidation waits until ``releaseInvalidations()``, as the
  /// kernel's waits for the directory's lock while a request in that directory holds it.
  func holdInvalidations() { gate.withLock { $0.held = true } }

  /// Lets the waiting entry invalidations (and later ones) go.
  func releaseInvalidations() {
    gate.withLock { $0.held = false }
    gateChanged.notifyAll()
  }

  /// Waits (up to `seconds`) until an entry invalidation is waiting at the gate.
  func waitForHeldInvalidation(seconds: Double = 30) -> Bool {
    gateChanged.wait(deadline: Clock.monotonic() + seconds) { gate.withLock { $0.waiting > 0 } }
  }

  func invalidateEntry(parent: NodeID, name: [UInt8]) -> Int32 {
    if gate.withLock({ $0.held }) {
      gate.withLock { $0.waiting += 1 }
      gateChanged.notifyAll()
      _ = gateChanged.wait { !gate.withLock { $0.held } }
      gate.withLock { $0.waiting -= 1 }
    }
    recorded.withLock { $0.append(.invalidateEntry(parent: parent, name: name)) }
    return 0
  }

  func delete(parent: NodeID, child: NodeID, name: [UInt8]) -> Int32 {
    recorded.withLock { $0.append(.delete(parent: parent, child: child, name: name)) }
    return 0
  }

  func invalidateInode(_ node: NodeID, offset: Int64, length: Int64) -> Int32 {
    recorded.withLock { $0.append(offset < 0 ? .invalidateAttributes(node) : .invalidateInode(node)) }
    return 0
  }
}

/// A write request's bytes held in memory.
struct ByteWriteData: WriteData {
  let bytes: [UInt8]

  var count: Int { bytes.count }

  func write(to fd: Int32, at offset: off_t, limit: Int?) throws(Errno) -> Int {
    let count = min(limit ?? bytes.count, bytes.count)
    return try bytes.withUnsafeBytes { all in
      Result { () throws(Errno) in try Sys.pwrite(fd, UnsafeRawBufferPointer(rebasing: all[..<count]), offset) }
    }.get()
  }
}

/// A readdir reply as a list of names, full after `capacity` entries (as a reply buffer
/// fills up).
struct ListFiller: DirectoryFiller {
  let plus: Bool
  var capacity = Int.max
  var names: [[UInt8]] = []
  var entries: [Entry] = []
  /// The offset to ask for next (what the last added entry said).
  var nextOffset: off_t = 0

  init(plus: Bool, capacity: Int = .max) {
    self.plus = plus
    self.capacity = capacity
  }

  mutating func add(name: FileName, attributes: stat, nextOffset: off_t) -> Bool {
    guard names.count < capacity else { return false }
    names.append(name.bytes)
    self.nextOffset = nextOffset
    return true
  }

  mutating func add(name: FileName, entry: Entry, nextOffset: off_t) -> Bool {
    guard names.count < capacity else { return false }
    names.append(name.bytes)
    entries.append(entry)
    self.nextOffset = nextOffset
    return true
  }
}

/// A write request whose copy fails with `error` after writing `written` of its bytes (a
/// full or failing backing filesystem part-way).
struct FailingWriteData: WriteData {
  let bytes: [UInt8]
  let written: Int
  let error: Errno

  var count: Int { bytes.count }

  func write(to fd: Int32, at offset: off_t, limit: Int?) throws(Errno) -> Int {
    if written > 0 { _ = try ByteWriteData(bytes: Array(bytes.prefix(written))).write(to: fd, at: offset, limit: nil) }
    throw error
  }
}
