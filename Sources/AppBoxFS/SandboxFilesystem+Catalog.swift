import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Keeping the books in step with the namespace
//
// Every change of name in Caches or tmp is mirrored in the purge catalog, and every
// change of allocation in the ledger, under the books' lock. Guards here (not
// preconditions) keep a backing tree changed behind AppBox's back from stopping the daemon.

extension SandboxFilesystem {
  /// Starts tracking a new regular file or directory named `name` in `directory`.
  func track(_ inode: Inode, name: [UInt8], in directory: Inode) {
    guard let parent = catalogParent(directory), inode.isRegularFile || inode.isDirectory else { return }
    let bytes = inode.allocated.withLock { $0 }
    let now = UInt32(clamping: Int(Clock.unix()))
    storage.books.withLock { books in
      let catalog = books.catalog
      if case .directory(let ino) = parent, !catalog.containsDirectory(ino: ino) { return }
      let ino = inode.key.inode
      if inode.isDirectory {
        if !catalog.containsDirectory(ino: ino) { catalog.registerDirectory(ino: ino, parent: parent, name: name) }
      } else if !catalog.contains(ino: ino) {
        catalog.addFile(ino: ino, parent: parent, name: name, bytes: bytes, lastUse: now)
        // Read under the lock that pins take, so no handle is missed or counted twice.
        for _ in 0..<Int(inode.openHandles.load(ordering: .relaxed)) { catalog.open(ino: ino) }
      }
    }
  }

  /// Counts a new handle of `inode` before the open returns; in Caches and tmp the count
  /// is kept under the books' lock, so a purge never takes a file with an open handle.
  /// - Throws: ESTALE when the file was purged since the kernel looked it up: the
  ///   kernel then looks the name up again and retries (an `O_CREAT` open creates it).
  func pin(_ inode: Inode) throws(Errno) {
    guard inode.isRegularFile, inode.domain.isPurgeable else {
      if inode.purged.load(ordering: .relaxed) { throw .stale }
      inode.openHandles.add(1, ordering: .relaxed)
      return
    }
    while true {
      if inode.purged.load(ordering: .relaxed) { throw .stale }
      switch storage.pin(inode) {
      case .pinned:
        touch(inode)
        return
      case .untracked:
        // Off the catalog: hard-linked, or purged by a purge that had not seen this inode.
        if let st = try? Sys.fstat(inode.fd), st.st_nlink == 0 {
          unpin(inode)
          throw .stale
        }
        touch(inode)
        return
      case .purging:
        sched_yield()  // a purge is between committing to this file and unlinking it
      }
    }
  }

  /// Takes back the count of ``pin(_:)``.
  func unpin(_ inode: Inode) {
    if inode.isRegularFile, inode.domain.isPurgeable {
      storage.unpin(inode)
    } else {
      inode.openHandles.subtract(1, ordering: .relaxed)
    }
  }

  /// A file that gains a second name is no longer purgeable (a purge removes one name).
  func linked(_ inode: Inode) {
    guard inode.domain.isPurgeable else { return }
    storage.books.withLock { _ = $0.catalog.removeFile(ino: inode.key.inode) }
  }

  /// Takes a removed name off the books: `st` is what the name was, `domain` where.
  /// A directory, or the last link of anything else, gives its allocation back.
  func untrack(_ st: stat, domain: StorageDomain) {
    let type = st.st_mode & S_IFMT
    guard type == S_IFDIR || st.st_nlink <= 1 else { return }
    let ino = UInt64(st.st_ino)
    let cached = inodes.existing(backingInode: ino)
    let bytes =
      cached?.allocated.withLock { charged in
        defer { charged = 0 }
        return charged
      } ?? Int64(st.st_blocks) * 512
    storage.books.withLock { books in
      if type == S_IFDIR {
        if domain.isPurgeable, !books.catalog.removeDirectory(ino: ino) {
          _ = books.catalog.removeSubtree(directory: ino)
        }
        books.ledger.charge(domain: domain, delta: -bytes)
      } else {
        // This unlink removed the last name, so it (not a purge) gives the bytes back.
        if domain.isPurgeable { books.catalog.removeFile(ino: ino) }
        books.ledger.charge(domain: domain, delta: -bytes)
      }
    }
  }

  /// Mirrors a rename of `st` from `from` to `newName` in `to` (same domain, or a
  /// non-directory moving between domains).
  func moved(_ st: stat, to newName: [UInt8], in to: Inode, from: Inode) {
    let ino = UInt64(st.st_ino)
    let isDirectory = st.st_mode & S_IFMT == S_IFDIR
    let cached = inodes.existing(backingInode: ino)
    let bytes = cached?.allocated.withLock { $0 } ?? Int64(st.st_blocks) * 512
    let newParent = catalogParent(to)
    cached?.domain = to.domain  // before the books: an open from now on pins it there
    storage.books.withLock { books in
      let catalog = books.catalog
      if from.domain != to.domain {
        books.ledger.charge(domain: from.domain, delta: -bytes)
        books.ledger.charge(domain: to.domain, delta: bytes)
      }
      let registered: Bool
      if case .directory(let parentIno)? = newParent {
        registered = catalog.containsDirectory(ino: parentIno)
      } else {
        registered = newParent != nil
      }
      if isDirectory {
        if let newParent, registered, catalog.renameDirectory(ino: ino, to: newParent, newName: newName) { return }
        if !registered { _ = catalog.removeSubtree(directory: ino) }
      } else if let newParent, registered {
        if !catalog.moveFile(ino: ino, to: newParent, newName: newName), st.st_mode & S_IFMT == S_IFREG,
          st.st_nlink == 1
        {
          catalog.addFile(
            ino: ino, parent: newParent, name: newName, bytes: bytes, lastUse: UInt32(clamping: Int(Clock.unix())))
          for _ in 0..<Int(cached?.openHandles.load(ordering: .relaxed) ?? 0) { catalog.open(ino: ino) }
        }
      } else {
        catalog.removeFile(ino: ino)
      }
    }
  }
}
