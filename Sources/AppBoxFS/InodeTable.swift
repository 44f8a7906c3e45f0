import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The nodes the kernel holds lookups on, keyed by backing inode so that hard links share
/// one node.
///
/// A node id is opaque: a slot of this table (low 32 bits, from 2 on: 0 and 1 are not
/// ids, 1 is the root) and how often that slot has been used before (high 32 bits). Any
/// user can read node ids (`name_to_handle_at` puts them in the handle), so they must not
/// say where anything is in the daemon's memory, and an id is not given out twice while
/// a slot's use count lasts (2³² reuses), as the kernel expects of a `(node, generation)`
/// pair.
final class InodeTable: Sendable {
  /// The container root (node id 1), never forgotten.
  let root: Inode
  /// Lock order: this lock is a leaf; nothing else is taken while it is held.
  private let state = Mutex(State())
  /// `state.byKey.count`, readable without the lock.
  private let held = Atomic<Int>(0)

  private struct State: ~Copyable {
    /// Each held inode under its backing inode.
    var byKey: [BackingKey: Inode] = [:]
    /// Each held inode in its slot; `nil` for a free slot.
    var slots: [Inode?] = []
    /// How often each slot has been given out.
    var uses: [UInt32] = []
    /// Free slots, reused last freed first.
    var free: [Int] = []

    /// Puts `make(id)` in a free slot.
    mutating func insert(_ make: (NodeID) -> Inode) -> Inode {
      let slot: Int
      if let reused = free.popLast() {
        slot = reused
        uses[slot] &+= 1
      } else {
        slot = slots.count
        slots.append(nil)
        uses.append(0)
      }
      let inode = make(NodeID(rawValue: UInt64(uses[slot]) << 32 | UInt64(slot + InodeTable.firstSlotID)))
      slots[slot] = inode
      return inode
    }
  }

  /// The id of slot 0 (0 is no id, 1 the root's).
  private static let firstSlotID = 2

  init(root: Inode) {
    precondition(root.node == .root)
    self.root = root
  }

  /// The inode behind a node id the kernel sent.
  func inode(_ node: NodeID) -> Inode {
    if node == .root { return root }
    let slot = Int(truncatingIfNeeded: node.rawValue & 0xFFFF_FFFF) - Self.firstSlotID
    let inode = state.withLock { state in slot >= 0 && slot < state.slots.count ? state.slots[slot] : nil }
    // The kernel only sends node ids it holds lookups on, and a slot keeps its inode until
    // the last forget: anything else is a broken invariant, not a request to answer.
    guard let inode, inode.node == node else {
      preconditionFailure("the kernel sent node id \(node.rawValue), which is not held")
    }
    return inode
  }

  /// The node id of an inode.
  @inline(__always)
  func node(_ inode: Inode) -> NodeID { inode.node }

  /// Records one more kernel lookup of the backing inode `fd` refers to. Takes ownership
  /// of `fd` (closed when an inode for the same backing inode already exists).
  func remember(
    fd: Int32, attributes: stat, fixed: SandboxLayout.FixedDirectory?, domain: StorageDomain, parent: NodeID,
    name: FileName
  ) -> Inode {
    let key = BackingKey(attributes)
    if key == root.key {
      Sys.close(fd)
      return root
    }
    let (inode, duplicate) = state.withLock { state -> (Inode, Bool) in
      if let existing = state.byKey[key] {
        existing.lookups.add(1, ordering: .relaxed)
        return (existing, true)
      }
      let created = state.insert { node in
        Inode(
          node: node, fd: fd, attributes: attributes, fixed: fixed, domain: domain, lookups: 1,
          origin: (parent, name.bytes))
      }
      state.byKey[key] = created
      held.store(state.byKey.count, ordering: .relaxed)
      return (created, false)
    }
    if duplicate { Sys.close(fd) }
    return inode
  }

  /// Takes `count` lookups away; the inode is dropped (and its descriptor closed) at zero.
  /// - Returns: the inode, if this dropped it (its descriptor closes when it is released).
  @discardableResult
  func forget(_ node: NodeID, count: UInt64) -> Inode? {
    guard node != .root else { return nil }
    let inode = self.inode(node)
    let dropped: Inode? = state.withLock { state in
      let before = inode.lookups.load(ordering: .relaxed)
      precondition(before >= count, "kernel forgot \(count) lookups of a node holding \(before)")
      inode.lookups.store(before - count, ordering: .relaxed)
      guard before == count else { return nil }
      defer { held.store(state.byKey.count, ordering: .relaxed) }
      let slot = Int(truncatingIfNeeded: node.rawValue & 0xFFFF_FFFF) - Self.firstSlotID
      state.slots[slot] = nil
      state.free.append(slot)
      return state.byKey.removeValue(forKey: inode.key)
    }
    return dropped  // released by the caller, outside the lock
  }

  /// The inode of a backing inode number, if the kernel holds it.
  func existing(backingInode: UInt64) -> Inode? {
    let key = BackingKey(device: root.key.device, inode: backingInode)
    if key == root.key { return root }
    return state.withLock { $0.byKey[key] }
  }

  /// How many nodes the kernel holds (each costs the daemon a descriptor).
  var count: Int { held.load(ordering: .relaxed) }

  /// A snapshot of every inode currently held (for cache invalidation sweeps).
  func snapshot() -> [Inode] { state.withLock { Array($0.byKey.values) } }
}
