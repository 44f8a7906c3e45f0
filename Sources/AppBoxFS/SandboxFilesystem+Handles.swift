import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - File handles: lookups of "." and ".."
//
// The kernel's file handle of a node is its node id and generation. Decoding one whose
// inode it no longer has, it looks "." up in that node id; connecting a directory to the
// tree, it looks ".." up in it. A forgotten node is found again through the backing
// filesystem's own handle, which ``InodeTable`` retains (bounded) for nodes it drops;
// opening by it needs CAP_DAC_READ_SEARCH, so a daemon without it retains nothing and
// handles go stale with the kernel's inode. Every mount draws a new generation, so
// handles from an earlier mount are stale even where a node id is given out again.

extension SandboxFilesystem {
  /// Whether `name` is "." or "..".
  static func dots(_ name: FileName) -> (dot: Bool, dotDot: Bool) {
    guard name.first == 0x2E else { return (false, false) }
    return (name.count == 1, name.count == 2 && name[1] == 0x2E)
  }

  /// `lookup` of "." in `node`, a node id from a file handle: +1 lookup on that node if
  /// it is held or retained and its file still has a name; else ESTALE.
  func lookupHandle(_ node: NodeID) throws(Errno) -> Entry {
    let fd: Int32
    var handle: InodeHandle?
    let place: Inode.Place
    switch inodes.resolve(node) {
    case .stale:
      throw .stale
    case .held(let inode):
      if isPurged(inode) { throw .stale }
      fd = try withDescriptors { () throws(Errno) in try Sys.dup(inode.fd) }
      place = Inode.Place(domain: inode.domain, container: inode.container)
    case .retained(let kept):
      fd = try withDescriptors { () throws(Errno) in
        try Sys.open(kept.handle, mountFD: handleMountFD, flags: Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
      }
      handle = kept.handle
      place = Inode.Place(domain: StorageDomain(rawValue: kept.domain) ?? .documents, container: kept.container)
    }
    return try remembered(fd, place: place, handle: handle, expected: node)
  }

  /// `lookup` of ".." in the held directory `directory`: +1 lookup on its parent.
  func lookupParent(of directory: Inode) throws(Errno) -> Entry {
    guard directory.isDirectory else { throw .notDirectory }
    // The root's parent is outside the sandbox: the root is its own, as on any mount.
    let isRoot = directory === inodes.root
    let fd = try withDescriptors { () throws(Errno) in
      isRoot
        ? try Sys.dup(directory.fd)
        : try Sys.openat(directory.fd, "..", Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    }
    return try remembered(
      fd, place: Inode.Place(domain: directory.domain, container: directory.container), handle: nil,
      expected: isRoot ? .root : nil)
  }

  /// The entry of `fd` (taken over) as a node: a directory of the layout (or a metadata
  /// file) is known by its backing inode, anything else stands at `place`. A file without
  /// a name any more is stale.
  private func remembered(_ fd: Int32, place: Inode.Place, handle: InodeHandle?, expected: NodeID?) throws(Errno)
    -> Entry
  {
    let attributes: stat
    do throws(Errno) { attributes = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw error
    }
    guard attributes.st_nlink > 0 else {
      Sys.close(fd)
      throw .stale
    }
    let known = layoutInodes.withLock { $0[UInt64(attributes.st_ino)] }
    let remembered = FileName.withBytes([]) { name in  // its name is not known
      inodes.remember(
        fd: fd, attributes: attributes, place: known ?? place, parent: .root, name: name, handle: handle,
        expected: expected)
    }
    guard let (inode, _) = remembered else { throw .stale }
    return entry(inode, attributes)
  }

  /// What to retain of `inode`, which a forget is about to drop: its backing file's
  /// handle and its charge, unless the file was removed or purged (its handles are stale
  /// then). Nil also when the handle cannot be read: then the node's handles go stale,
  /// which is what "not retained" means. `status`: the file's, if the forget's last
  /// measurement just read it.
  func retainedRecord(_ inode: Inode, status: stat?) -> InodeTable.Retained? {
    guard !inode.purged.load(ordering: .relaxed), !inode.unlinked.load(ordering: .relaxed),
      let attributes = status ?? (try? Sys.fstat(inode.fd)),
      attributes.st_nlink > 0, let handle = try? Sys.inodeHandle(inode.fd)
    else { return nil }
    return InodeTable.Retained(
      handle: handle, inode: inode.key.inode, domain: inode.domain.rawValue, container: inode.container,
      charged: inode.allocated.withLock { $0 })
  }

  /// A readable descriptor of the backing root (`rootFD`) if this daemon may open backing
  /// files by handle (CAP_DAC_READ_SEARCH), else -1. Open for the daemon's life. A probe:
  /// any failure (EPERM without the capability, a backing filesystem without handles)
  /// means handles are not available, and forgotten nodes are not retained.
  static func handleMountDescriptor(_ rootFD: Int32) -> Int32 {
    guard let mountFD = try? Sys.reopen(rootFD, flags: O_RDONLY | O_DIRECTORY | O_CLOEXEC) else { return -1 }
    guard let handle = try? Sys.inodeHandle(rootFD),
      let fd = try? Sys.open(handle, mountFD: mountFD, flags: Linux.openPath | O_CLOEXEC)
    else {
      Sys.close(mountFD)
      return -1
    }
    Sys.close(fd)
    return mountFD
  }
}
