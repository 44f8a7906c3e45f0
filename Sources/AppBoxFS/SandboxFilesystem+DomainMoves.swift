import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Directories moving between domains
//
// A rename that takes a directory to another domain is one `renameat2` on the backing
// tree, as on a device (one volume). Its subtree's bookkeeping follows it: the inodes the
// kernel holds take the new domain, the usage of every block moves from the old domain
// to the new one, and the purge catalog loses the subtree (moving out of Caches and tmp),
// gains it (moving in) or moves it to the other list (between them). A purge never takes
// a file out of a subtree while it moves (``StorageState/beginMove(_:)``).

extension SandboxFilesystem {
  /// A directory that changes domain in a rename.
  struct MovingSubtree {
    /// `O_PATH` descriptor taken before the rename, so it follows the directory.
    let fd: Int32
    let ino: UInt64
    let from: StorageArea
    let to: StorageArea
    /// The directory it is in after the rename, and its name there.
    let newParent: Inode
    let newName: [UInt8]
  }

  /// `rename` (and `RENAME_EXCHANGE`, `RENAME_NOREPLACE`) when a directory changes domain:
  /// `source` is `name` in `from`, `target` what `newName` in `to` was, if anything.
  /// 1. Opens each directory that moves and walks it: a file inside with a link outside
  ///    the directory is EXDEV (hard links stay within a domain), and nothing changes.
  /// 2. Stops purges from committing to files inside, and waits for those committed.
  /// 3. Renames, once, on the backing tree.
  /// 4. Walks each moved directory again: moves inodes and usage to the new domain,
  ///    gathers what the catalog gains.
  /// 5. Brings the catalog up to date and lets purges in again.
  /// Cost: two walks of the subtree (O(files), one `fstatat` per entry each).
  func renameAcrossDomains(
    from: Inode, name: FileName, to: Inode, newName: FileName, flags: UInt32,
    source: stat, target: stat?
  ) throws(Errno) {
    let exchange = flags & Linux.renameExchange != 0
    let isDirectory = { (st: stat) in st.st_mode & S_IFMT == S_IFDIR }
    try domainMoves.withLock { _ throws(Errno) in
      var subtrees: [MovingSubtree] = []
      defer { for subtree in subtrees { Sys.close(subtree.fd) } }
      if isDirectory(source) {
        subtrees.append(try openSubtree(name, in: from, expected: source, movingTo: to, as: newName.bytes))
      }
      if exchange, let target, isDirectory(target) {
        subtrees.append(try openSubtree(newName, in: to, expected: target, movingTo: from, as: name.bytes))
      }
      for subtree in subtrees { try checkLinksInside(subtree) }
      storage.waitForVictims(storage.beginMove(subtrees.map(\.ino)))
      let room = reserve(AllocationBlocks.size, area: to.area)
      let heldTarget = target.flatMap { inodes.existing(backingInode: UInt64($0.st_ino)) }  // before it is replaced
      do throws(Errno) { try Sys.renameat2(from.fd, name.cString, to.fd, newName.cString, flags) } catch {
        storage.endMove { _ in }
        room.cancel()
        throw error
      }
      if !exchange, let target { untrack(target, name: newName, in: to, held: heldTarget) }
      var additions: [(PurgeCatalog.Addition, Inode?)] = []
      for subtree in subtrees { moveBooks(of: subtree, additions: &additions) }
      storage.endMove { books in
        for subtree in subtrees { updateCatalog(books.catalog, for: subtree) }
        let added = Set(books.catalog.addFiles(additions.map(\.0)))
        for (addition, inode) in additions where added.contains(addition.ino) {
          // Read under the lock that pins take, so no handle is missed or counted twice.
          for _ in 0..<Int(inode?.openHandles.load(ordering: .relaxed) ?? 0) { books.catalog.open(ino: addition.ino) }
        }
      }
      // A file exchanged with a directory moves as any file does.
      if !isDirectory(source) { moved(source, from: name.bytes, in: from, to: newName.bytes, in: to) }
      if exchange, let target, !isDirectory(target) {
        moved(target, from: newName.bytes, in: to, to: name.bytes, in: from)
      }
      account(from, fd: from.fd)
      settle(room, to, fd: to.fd)
    }
  }

  /// Opens the directory `name` in `parent` that is about to move to `newParent`, checking
  /// it is still `expected` (ENOENT if the name changed meanwhile).
  private func openSubtree(
    _ name: FileName, in parent: Inode, expected: stat, movingTo newParent: Inode, as newName: [UInt8]
  ) throws(Errno) -> MovingSubtree {
    let fd = try withDescriptors { () throws(Errno) -> Int32 in
      try Sys.openat(parent.fd, name.cString, Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    }
    let st: stat
    do throws(Errno) { st = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw error
    }
    guard st.st_ino == expected.st_ino else {
      Sys.close(fd)
      throw .noEntry
    }
    return MovingSubtree(
      fd: fd, ino: UInt64(st.st_ino), from: parent.area, to: newParent.area, newParent: newParent,
      newName: newName)
  }

  /// EXDEV when a file below the subtree has a link outside it: hard links stay within a
  /// domain. (A file whose every link is inside moves with them.)
  private func checkLinksInside(_ subtree: MovingSubtree) throws(Errno) {
    var links: [UInt64: (seen: Int, total: Int)] = [:]
    try SubtreeWalk.run(below: subtree.fd) { entry throws(Errno) in
      guard !entry.isDirectory, entry.st.st_nlink > 1 else { return }
      links[UInt64(entry.st.st_ino), default: (0, Int(entry.st.st_nlink))].seen += 1
    }
    if links.values.contains(where: { $0.seen < $0.total }) { throw .crossDevice }
  }

  /// Moves the subtree's usage and held inodes to its new domain (directories before their
  /// entries, so an inode looked up below one already moved is born in the new domain),
  /// and, moving into Caches or tmp, registers its directories and gathers its files for
  /// the catalog, each at its own last use (the later of its access and modification
  /// times, as the mount-time index places it).
  private func moveBooks(of subtree: MovingSubtree, additions: inout [(PurgeCatalog.Addition, Inode?)]) {
    let (old, new) = (subtree.from, subtree.to)
    let movingIn = new.domain.isPurgeable && !old.domain.isPurgeable
    let movingOut = old.domain.isPurgeable && !new.domain.isPurgeable
    do throws(Errno) {
      moveCharge(try Sys.fstat(subtree.fd), cached: inodes.existing(backingInode: subtree.ino), from: old, to: new)
    } catch {
      internalError(
        .domainMove, error, "rename: cannot measure a directory moved to \(new); its own block stays in \(old)")
    }
    if movingIn, let parent = catalogParent(subtree.newParent) {
      register(subtree.ino, in: parent, name: subtree.newName)
    }
    let urgencyName = Array(AppBoxAttribute.purgeUrgency.name.utf8CString)
    var counted = Set<UInt64>()
    do throws(Errno) {
      try SubtreeWalk.run(below: subtree.fd) { entry in
        let st = entry.st
        let ino = UInt64(st.st_ino)
        if !entry.isDirectory, st.st_nlink > 1 {
          guard counted.insert(ino).inserted else { return }
          if movingOut { linkNames.forget(ino: ino) }
        }
        let cached = inodes.existing(backingInode: ino)
        moveCharge(st, cached: cached, from: old, to: new)
        guard movingIn else { return }
        let name = FileName(entry.name).bytes
        if entry.isDirectory {
          register(ino, in: .directory(entry.directoryInode), name: name)
        } else if st.st_mode & S_IFMT == S_IFREG, st.st_nlink == 1 {
          // No urgency, or one that names none: no urgency (purged after files with one,
          // never earlier than it should be).
          let urgency =
            urgencyName.withUnsafeBufferPointer { attribute in
              Xattr.value(in: entry.directoryFD, entry: entry.name, attribute.baseAddress!)
            }.flatMap { try? PurgeUrgency.parse(attributeValue: $0) } ?? PurgeUrgency.none
          let bytes = cached?.allocated.withLock { $0 } ?? Int64(st.st_blocks) * 512
          let addition = PurgeCatalog.Addition(
            ino: ino, parent: .directory(entry.directoryInode), name: name, bytes: bytes, urgency: urgency,
            lastUse: UInt32(clamping: max(st.st_atim.tv_sec, st.st_mtim.tv_sec)))
          additions.append((addition, cached))
        }
      }
    } catch {
      // The rename is done; what could not be read keeps its old domain in the books until
      // the next mount re-derives them.
      internalError(
        .domainMove, error, "rename: cannot walk a directory moved to \(new); its usage by domain is off until remount")
    }
  }

  /// Registers a directory that moved into Caches or tmp, below its registered parent.
  private func register(_ ino: UInt64, in parent: PurgeCatalog.Parent, name: [UInt8]) {
    storage.books.withLock { books in
      let catalog = books.catalog
      if case .directory(let parentIno) = parent, !catalog.containsDirectory(ino: parentIno) { return }
      guard !catalog.containsDirectory(ino: ino), !catalog.contains(ino: ino) else { return }
      catalog.registerDirectory(ino: ino, parent: parent, name: name)
    }
  }

  /// The catalog's side of a moved subtree (its files moving in were gathered by
  /// ``moveBooks(of:additions:)``).
  private func updateCatalog(_ catalog: PurgeCatalog, for subtree: MovingSubtree) {
    switch (subtree.from.domain.isPurgeable, subtree.to.domain.isPurgeable) {
    case (true, true):
      let parent = catalogParent(subtree.newParent)!
      let registered = parent.directoryInode.map { catalog.containsDirectory(ino: $0) } ?? true
      if !registered || !catalog.renameDirectory(ino: subtree.ino, to: parent, newName: subtree.newName) {
        _ = catalog.removeSubtree(directory: subtree.ino)
      }
    case (true, false):
      _ = catalog.removeSubtree(directory: subtree.ino)
    case (false, _):
      break
    }
  }
}
