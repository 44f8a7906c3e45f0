import FuseBridge
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The nodes the kernel holds lookups on, keyed by backing inode so that hard links share
/// one node. A node id is the address of its ``Inode`` (O(1) from request to inode);
/// the table's strong reference keeps the address valid until the last forget.
final class InodeTable: Sendable {
  /// The container root (node id 1), never forgotten.
  let root: Inode
  /// Lock order: this lock is a leaf; nothing else is taken while it is held.
  private let nodes = Mutex<[BackingKey: Inode]>([:])
  /// `nodes.count`, readable without the lock.
  private let held = Atomic<Int>(0)

  init(root: Inode) {
    self.root = root
  }

  /// The inode behind a node id the kernel sent.
  @inline(__always)
  func inode(_ node: NodeID) -> Inode {
    if node == .root { return root }
    // Safe: the kernel only sends node ids it holds lookups on, and the table retains
    // each inode until its lookups drop to zero.
    return Unmanaged<Inode>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(node.rawValue))!).takeUnretainedValue()
  }

  /// The node id of an inode.
  @inline(__always)
  func node(_ inode: Inode) -> NodeID {
    inode === root ? .root : NodeID(rawValue: UInt64(UInt(bitPattern: Unmanaged.passUnretained(inode).toOpaque())))
  }

  /// Records one more kernel lookup of the backing inode `fd` refers to. Takes ownership
  /// of `fd` (closed when an inode for the same backing inode already exists).
  func remember(
    fd: Int32, attributes: stat, fixed: SandboxLayout.FixedDirectory?, domain: StorageDomain, parent: NodeID,
    name: CName
  ) -> Inode {
    let key = BackingKey(attributes)
    if key == root.key {
      Sys.close(fd)
      return root
    }
    let (inode, duplicate) = nodes.withLock { table -> (Inode, Bool) in
      if let existing = table[key] {
        existing.lookups.add(1, ordering: .relaxed)
        return (existing, true)
      }
      let created = Inode(
        fd: fd, attributes: attributes, fixed: fixed, domain: domain, lookups: 1, origin: (parent, name.bytes))
      table[key] = created
      held.store(table.count, ordering: .relaxed)
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
    let dropped: Inode? = nodes.withLock { table in
      let before = inode.lookups.load(ordering: .relaxed)
      precondition(before >= count, "kernel forgot \(count) lookups of a node holding \(before)")
      inode.lookups.store(before - count, ordering: .relaxed)
      guard before == count else { return nil }
      defer { held.store(table.count, ordering: .relaxed) }
      return table.removeValue(forKey: inode.key)
    }
    return dropped  // released by the caller, outside the lock
  }

  /// The inode of a backing inode number, if the kernel holds it.
  func existing(backingInode: UInt64) -> Inode? {
    let key = BackingKey(device: root.key.device, inode: backingInode)
    if key == root.key { return root }
    return nodes.withLock { $0[key] }
  }

  /// How many nodes the kernel holds (each costs the daemon a descriptor).
  var count: Int { held.load(ordering: .relaxed) }

  /// A snapshot of every inode currently held (for cache invalidation sweeps).
  func snapshot() -> [Inode] { nodes.withLock { Array($0.values) } }
}
