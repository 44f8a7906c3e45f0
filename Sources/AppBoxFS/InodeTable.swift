import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The nodes the kernel holds lookups on, keyed by backing inode so that hard links share
/// one node, and the last nodes it forgot, so that a file handle outlives the kernel's
/// inode (see ``Retained``).
///
/// A node id is opaque: a slot of this table (low 32 bits, from 2 on: 0 and 1 are not
/// ids, 1 is the root) and how often that slot has been used before (high 32 bits). Any
/// user can read node ids (`name_to_handle_at` puts them in the handle), so they must not
/// say where anything is in the daemon's memory, and an id is not given out twice while
/// a slot's use count lasts (2³² reuses), as the kernel expects of a `(node, generation)`
/// pair. A forgotten node keeps its slot, and so its id, while it is retained: a lookup
/// of its name or of its handle gives it back the same id.
final class InodeTable: Sendable {
  /// The container root (node id 1), never forgotten.
  let root: Inode
  /// How many forgotten nodes are retained at most (0: none); beyond, the least recently
  /// forgotten one is dropped and its handles are stale.
  let retainedLimit: Int
  /// Lock order: this lock is a leaf; nothing else is taken while it is held.
  private let state = Mutex(State())
  /// Held nodes, readable without the lock.
  private let held = Atomic<Int>(0)

  /// What the table keeps of a node the kernel forgot: enough to open its backing file
  /// again (``Sys/open(_:mountFD:flags:)``), and what the quota's books hold for it, 56
  /// bytes in its slot.
  struct Retained: Sendable {
    /// The backing filesystem's handle of the file.
    let handle: InodeHandle
    /// The backing inode number (the key on the root's device).
    let inode: UInt64
    /// Its storage domain (`StorageDomain` raw value) when it was forgotten.
    let domain: UInt8
    /// Its container.
    let container: ContainerNumber
    /// Its allocation as the books charged it at the forget's last measurement: the node,
    /// taken again, starts from it (``Inode/allocated``), so that its first measurement
    /// charges what the backing filesystem allocated in between (at writeback).
    let charged: Int64

    /// A free or held slot's record.
    static let none = Retained(handle: .none, inode: 0, domain: 0, container: .top, charged: 0)
  }

  /// What a node id the kernel sent denotes now.
  enum Resolution {
    /// A node the kernel holds.
    case held(Inode)
    /// A node the kernel forgot, still retained.
    case retained(Retained)
    /// Never given out, dropped, or its slot reused: its handles are stale.
    case stale
  }

  private struct State: ~Copyable {
    /// The slot of each held or retained backing inode.
    var byKey: [BackingKey: Int32] = [:]
    /// Each held inode in its slot; `nil` for a retained or free slot.
    var slots: [Inode?] = []
    /// How often each slot has been given out.
    var uses: [UInt32] = []
    /// What each retained slot keeps (meaningless for the others).
    var retained: [Retained] = []
    /// Retained slots from least to most recently forgotten: a doubly linked list through
    /// `older`/`newer` (-1: none).
    var older: [Int32] = []
    var newer: [Int32] = []
    var oldest: Int32 = -1
    var newest: Int32 = -1
    var retainedCount = 0
    var heldCount = 0
    /// Free slots, reused last freed first.
    var free: [Int32] = []

    func node(_ slot: Int32) -> NodeID {
      NodeID(rawValue: UInt64(uses[Int(slot)]) << 32 | UInt64(Int(slot) + InodeTable.firstSlotID))
    }

    /// The slot of `node`, if its use count is the slot's current one.
    func slot(of node: NodeID) -> Int32? {
      let slot = Int(truncatingIfNeeded: node.rawValue & 0xFFFF_FFFF) - InodeTable.firstSlotID
      guard slot >= 0, slot < slots.count, UInt64(uses[slot]) == node.rawValue >> 32 else { return nil }
      return Int32(slot)
    }

    /// Whether a slot is retained (a free or held slot's record has inode number 0).
    func isRetained(_ slot: Int32) -> Bool { slots[Int(slot)] == nil && retained[Int(slot)].inode != 0 }

    /// A free slot, its use count moved on if it was used before.
    mutating func allocate() -> Int32 {
      if let reused = free.popLast() {
        uses[Int(reused)] &+= 1
        return reused
      }
      let slot = Int32(slots.count)
      slots.append(nil)
      uses.append(0)
      retained.append(.none)
      older.append(-1)
      newer.append(-1)
      return slot
    }

    mutating func link(_ slot: Int32) {
      older[Int(slot)] = newest
      newer[Int(slot)] = -1
      if newest >= 0 { newer[Int(newest)] = slot } else { oldest = slot }
      newest = slot
      retainedCount += 1
    }

    mutating func unlink(_ slot: Int32) {
      let (before, after) = (older[Int(slot)], newer[Int(slot)])
      if before >= 0 { newer[Int(before)] = after } else { oldest = after }
      if after >= 0 { older[Int(after)] = before } else { newest = before }
      retainedCount -= 1
      retained[Int(slot)] = .none
    }

    /// Drops a retained slot: its node id is never given out again.
    mutating func drop(_ slot: Int32, device: UInt64) {
      byKey.removeValue(forKey: BackingKey(device: device, inode: retained[Int(slot)].inode))
      unlink(slot)
      free.append(slot)
    }
  }

  /// The id of slot 0 (0 is no id, 1 the root's).
  private static let firstSlotID = 2

  init(root: Inode, retainedLimit: Int) {
    precondition(root.node == .root)
    self.root = root
    self.retainedLimit = retainedLimit
  }

  /// The inode behind a node id the kernel sent with a request on it.
  func inode(_ node: NodeID) -> Inode {
    if node == .root { return root }
    let inode = state.withLock { state in state.slot(of: node).flatMap { state.slots[Int($0)] } }
    // The kernel only sends requests on node ids it holds lookups on, and a slot keeps its
    // inode until the last forget: anything else is a broken invariant, not a request to
    // answer. (A handle's node id comes as a lookup of ".", through ``resolve(_:)``.)
    guard let inode else { preconditionFailure("the kernel sent node id \(node.rawValue), which is not held") }
    return inode
  }

  /// What `node` (from a file handle: any value) denotes now.
  func resolve(_ node: NodeID) -> Resolution {
    if node == .root { return .held(root) }
    return state.withLock { state in
      guard let slot = state.slot(of: node) else { return .stale }
      if let inode = state.slots[Int(slot)] { return .held(inode) }
      return state.isRetained(slot) ? .retained(state.retained[Int(slot)]) : .stale
    }
  }

  /// The node id of an inode.
  @inline(__always)
  func node(_ inode: Inode) -> NodeID { inode.node }

  /// Records one more kernel lookup of the backing inode `fd` refers to. Takes ownership
  /// of `fd` (closed when an inode for the same backing inode already exists).
  /// - Parameters:
  ///   - handle: the backing file's handle, when it was opened by it; else a retained
  ///     node of the same backing inode number is taken again only if its handle is the
  ///     file's (the number may have been reused by a new file).
  ///   - expected: the node id this lookup must give (a lookup of a handle's "."), or nil.
  /// - Returns: the inode, and whether this made it (nil if the backing inode does not
  ///   have the node id `expected`: its handle is stale).
  func remember(
    fd: Int32, attributes: stat, place: Inode.Place, parent: NodeID,
    name: FileName, handle: InodeHandle? = nil, expected: NodeID? = nil
  ) -> (Inode, isNew: Bool)? {
    let key = BackingKey(attributes)
    if key == root.key {
      Sys.close(fd)
      return expected == nil || expected == .root ? (root, false) : nil
    }
    // Whether a retained node is this file is told by the backing file's handle, a
    // system call made outside the lock: asked for when the key turns out retained, and
    // the table looked at again afterwards (the node may have been dropped, or taken again,
    // meanwhile; and a node held a moment ago may be retained by now: a forget racing this
    // lookup, after which the file must get its node id back).
    var known = handle
    var askedForHandle = handle != nil || retainedLimit == 0
    while true {
      let outcome = state.withLock { state -> Remembered in
        var slot = state.byKey[key]
        if let existing = slot, state.slots[Int(existing)] == nil {
          guard askedForHandle else { return .needsHandle }
          if state.retained[Int(existing)].handle != known {
            state.drop(existing, device: key.device)  // another file under a reused inode number
            slot = nil
          }
        }
        if let expected, slot.map({ state.node($0) }) != expected { return .found(nil, duplicate: true) }
        if let slot, let existing = state.slots[Int(slot)] {
          existing.lookups.add(1, ordering: .relaxed)
          existing.found(in: parent, as: name)
          return .found(existing, duplicate: true)
        }
        let taken: Int32
        var charged: Int64?
        if let slot {
          charged = state.retained[Int(slot)].charged
          state.unlink(slot)  // retained: the same node again (its record cleared)
          taken = slot
        } else {
          taken = state.allocate()
          state.byKey[key] = taken
        }
        let created = Inode(
          node: state.node(taken), fd: fd, attributes: attributes, place: place, lookups: 1,
          origin: (parent, name.bytes), charged: charged)
        state.slots[Int(taken)] = created
        state.heldCount += 1
        held.store(state.heldCount, ordering: .relaxed)
        return .found(created, duplicate: false)
      }
      switch outcome {
      case .needsHandle:
        // Absent means "not the retained file": its node is dropped and the file gets a
        // new one (handles of the old one go stale), never another file's.
        known = try? Sys.inodeHandle(fd)
        askedForHandle = true
      case .found(let inode, let duplicate):
        if duplicate { Sys.close(fd) }
        return inode.map { ($0, !duplicate) }
      }
    }
  }

  /// What one look at the table in ``remember(fd:attributes:place:parent:name:handle:expected:)`` found.
  private enum Remembered {
    /// The key is retained: the file's handle must be compared with the retained one.
    case needsHandle
    /// The inode (nil: not the expected node id); `duplicate`: `fd` is not kept.
    case found(Inode?, duplicate: Bool)
  }

  /// Takes `count` lookups away; the inode is dropped (and its descriptor closed) at zero.
  /// - Parameter lastLook: called, outside the lock (it may make system calls), when the
  ///   count is about to reach zero, with whether the node may be retained; it returns what
  ///   to keep of the node (nil: nothing, its handles go stale at once). The count is
  ///   looked at again afterwards, since a lookup may have come meanwhile. Until the drop,
  ///   a lookup of the file finds this node: what `lastLook` does to it is not missed by
  ///   a node made for the file afterwards.
  /// - Returns: the inode, if this dropped it (its descriptor closes when it is released).
  @discardableResult
  func forget(
    _ node: NodeID, count: UInt64, lastLook: (Inode, _ retainable: Bool) -> Retained? = { _, _ in nil }
  ) -> Inode? {
    guard node != .root else { return nil }
    let inode = self.inode(node)
    let retainable = retainedLimit > 0 && inode.key.device == root.key.device
    var retaining: Retained??  // nil: not asked for yet
    while true {
      let outcome = state.withLock { state -> Forgotten in
        let before = inode.lookups.load(ordering: .relaxed)
        precondition(before >= count, "kernel forgot \(count) lookups of a node holding \(before)")
        if before == count, retaining == nil { return .needsRecord }
        inode.lookups.store(before - count, ordering: .relaxed)
        guard before == count else { return .kept }
        let slot = state.slot(of: node)!
        state.slots[Int(slot)] = nil
        state.heldCount -= 1
        held.store(state.heldCount, ordering: .relaxed)
        if retainable, let retaining = retaining ?? nil {
          state.retained[Int(slot)] = retaining
          state.link(slot)
          while state.retainedCount > retainedLimit { state.drop(state.oldest, device: root.key.device) }
        } else {
          state.byKey.removeValue(forKey: inode.key)
          state.free.append(slot)
        }
        return .dropped
      }
      switch outcome {
      case .needsRecord: retaining = .some(lastLook(inode, retainable))
      case .kept: return nil
      case .dropped: return inode  // released by the caller, outside the lock
      }
    }
  }

  /// What one look at the table in ``forget(_:count:retaining:)`` found.
  private enum Forgotten {
    /// The node is about to be dropped: its last look comes first.
    case needsRecord
    /// Lookups are left.
    case kept
    /// The node was dropped (and retained if it had a record).
    case dropped
  }

  /// The inode of a backing inode number, if the kernel holds it.
  func existing(backingInode: UInt64) -> Inode? {
    let key = BackingKey(device: root.key.device, inode: backingInode)
    if key == root.key { return root }
    return state.withLock { state in state.byKey[key].flatMap { state.slots[Int($0)] } }
  }

  /// How many nodes the kernel holds (each costs the daemon a descriptor).
  var count: Int { held.load(ordering: .relaxed) }

  /// How many forgotten nodes are retained.
  var retainedCount: Int { state.withLock { $0.retainedCount } }

  /// A snapshot of every inode currently held (for cache invalidation sweeps).
  func snapshot() -> [Inode] { state.withLock { $0.slots.compactMap { $0 } } }
}
