import FilesystemInterface
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
      if books.closing.contains(inode.container) { return }  // its container is being removed
      let ino = inode.key.inode
      // The number of an item removed a moment ago, on another thread whose removal is not
      // on the books yet (it comes right after its unlink), or behind AppBoxFS's back: the
      // stale entry goes, so that the new item is tracked as what it is.
      if inode.isDirectory ? catalog.contains(ino: ino) : catalog.containsDirectory(ino: ino) {
        if inode.isDirectory {
          catalog.removeFile(ino: ino)
        } else if !catalog.removeDirectory(ino: ino) {
          _ = catalog.removeSubtree(directory: ino)
        }
      }
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
      if isPurged(inode) { throw .stale }
      inode.openHandles.add(1, ordering: .relaxed)
      return
    }
    while true {
      if isPurged(inode) { throw .stale }
      switch storage.pin(inode) {
      case .pinned:
        touch(inode)
        return
      case .untracked:
        // Off the catalog: hard-linked, or purged by a purge that had not seen this inode.
        // A file that cannot be looked at is not opened (its error), rather than opened
        // without knowing whether a purge removed it.
        let links: nlink_t
        do throws(Errno) { links = try Sys.fstat(inode.fd).st_nlink } catch {
          unpin(inode)
          throw error
        }
        if links == 0 {
          unpin(inode)
          throw .stale
        }
        touch(inode)
        return
      case .purging:
        // A purge is between committing to this file and unlinking it: sleep until it is
        // done with it, then look again (purged: ESTALE; given up: pinned).
        storage.waitUntilSettled(inode.key.inode)
      }
    }
  }

  /// Whether a purge removed `inode`'s file. A purge marks the inode just before it
  /// unlinks the name: this waits for that unlink (or for the purge to give the file up,
  /// which clears the mark before it lets the file go), so that when the kernel, told
  /// ESTALE, looks the name up again, the name is gone; answered before the unlink, the
  /// kernel would find the same file and fail the call.
  func isPurged(_ inode: Inode) -> Bool {
    guard inode.purged.load(ordering: .relaxed) else { return false }
    storage.waitUntilSettled(inode.key.inode)
    return inode.purged.load(ordering: .relaxed)
  }

  /// Takes back the count of ``pin(_:)``.
  func unpin(_ inode: Inode) {
    if inode.isRegularFile, inode.domain.isPurgeable {
      storage.unpin(inode)
    } else {
      inode.openHandles.subtract(1, ordering: .relaxed)
    }
  }

  /// A file that gains a second name, `newName` in `directory`, is no longer purgeable
  /// (a purge removes one name); its names are followed until it is down to one.
  func linked(_ inode: Inode, as newName: [UInt8], in directory: Inode) {
    guard inode.domain.isPurgeable else { return }
    let ino = inode.key.inode
    let first = storage.books.withLock { books -> LinkNames.Name? in
      let entry = books.catalog.entry(ino: ino)
      _ = books.catalog.removeFile(ino: ino)
      return entry.map { LinkNames.Name(parent: $0.parent, name: $0.name) }
    }
    if inode.isRegularFile, let parent = catalogParent(directory) {
      linkNames.linked(ino: ino, first: first, added: LinkNames.Name(parent: parent, name: newName))
    }
  }

  /// Takes a removed name, `name` in `directory`, off the books: `st` is what the name
  /// was. A directory, or the last link of anything else, gives its allocation back; a
  /// file left with one link is purgeable again.
  /// - Parameter held: the item's inode if the kernel held it, found before the removal:
  ///   afterwards its number may already be a new item's (created on another thread).
  func untrack(_ st: stat, name: FileName, in directory: Inode, held cached: Inode?) {
    let domain = directory.domain
    let area = directory.area
    let type = st.st_mode & S_IFMT
    if type == S_IFREG, st.st_nlink > 1 {
      lostLink(st, name: name.bytes, in: directory)
      return
    }
    guard type == S_IFDIR || st.st_nlink <= 1 else { return }
    // Its last name is gone: with no handle open, nothing on the mount reaches it again
    // (else its last release takes it off the list).
    if type == S_IFREG, (cached?.openHandles.load(ordering: .acquiring) ?? 0) == 0 {
      writeMapped.remove(BackingKey(st))
    }
    let ino = UInt64(st.st_ino)
    // A held inode was charged to its own domain (read under its lock, as a move reads it).
    // A file still open keeps its charge until its last handle is released (its blocks stay
    // allocated, and writes through the handle are charged as before).
    let (bytes, chargedArea) =
      cached.map { inode in
        inode.allocated.withLock { charged in
          inode.unlinked.store(true, ordering: .relaxed)
          return Self.giveBack(&charged, inode)
        }
      } ?? (Int64(st.st_blocks) * 512, area)
    storage.books.withLock { books in
      if type == S_IFDIR {
        if domain.isPurgeable, !books.catalog.removeDirectory(ino: ino) {
          _ = books.catalog.removeSubtree(directory: ino)
        }
      } else if domain.isPurgeable {
        // This unlink removed the last name, so it (not a purge) gives the bytes back.
        books.catalog.removeFile(ino: ino)
      }
      books.ledger.charge(chargedArea, delta: -bytes)
    }
  }

  /// What an item that lost its last name gives back of `charged` (its inode's charge,
  /// under its lock), and where: nothing yet when it is a file with open handles (it is
  /// charged until the last is released), else all of it.
  static func giveBack(_ charged: inout Int64, _ inode: Inode) -> (Int64, StorageArea) {
    if inode.isRegularFile, inode.openHandles.load(ordering: .acquiring) > 0 {
      inode.chargedUnlinked.store(true, ordering: .relaxed)
      return (0, inode.area)
    }
    defer { charged = 0 }
    return (charged, inode.area)
  }

  /// A file with other links lost the name `name` in `directory`: down to one link, it
  /// goes back on the purge catalog under its remaining name.
  private func lostLink(_ st: stat, name: [UInt8], in directory: Inode) {
    guard let parent = catalogParent(directory) else { return }
    let ino = UInt64(st.st_ino)
    let remaining = Int(st.st_nlink) - 1
    guard let last = linkNames.removed(ino: ino, LinkNames.Name(parent: parent, name: name), remaining: remaining)
    else { return }
    let cached = inodes.existing(backingInode: ino)
    let bytes = cached?.allocated.withLock { $0 } ?? Int64(st.st_blocks) * 512
    let opens = Int(cached?.openHandles.load(ordering: .relaxed) ?? 0)
    let now = UInt32(clamping: Int(Clock.unix()))
    storage.books.withLock { books in
      let catalog = books.catalog
      if case .directory(let directoryIno) = last.parent, !catalog.containsDirectory(ino: directoryIno) { return }
      if books.closing.contains(directory.container) { return }
      guard !catalog.contains(ino: ino), !catalog.containsDirectory(ino: ino) else { return }
      catalog.addFile(ino: ino, parent: last.parent, name: last.name, bytes: bytes, lastUse: now)
      for _ in 0..<opens { catalog.open(ino: ino) }
    }
  }

  /// Moves the charge of one item that changed domain (from `from` to `to`, within its
  /// container), and the domain of its inode if the kernel holds it (`cached`). A held inode is switched under
  /// its allocation's lock with the books' lock inside it, so a measurement racing the move
  /// charges either the old domain before the move or the new one after it; one already
  /// switched (looked up in its new place) is left alone.
  func moveCharge(_ st: stat, cached: Inode?, from: StorageArea, to: StorageArea) {
    guard let inode = cached else {
      storage.move(Int64(st.st_blocks) * 512, from: from, to: to)
      return
    }
    inode.allocated.withLock { charged in
      guard inode.domain == from.domain else { return }
      inode.domain = to.domain
      storage.move(charged, from: from, to: to)
    }
  }

  /// Mirrors a rename of `st` from `oldName` in `from` to `newName` in `to` (same domain,
  /// or a non-directory with one link moving between domains).
  func moved(_ st: stat, from oldName: [UInt8], in from: Inode, to newName: [UInt8], in to: Inode) {
    let ino = UInt64(st.st_ino)
    if st.st_mode & S_IFMT == S_IFREG, st.st_nlink > 1, let oldParent = catalogParent(from),
      let newParent = catalogParent(to)
    {
      linkNames.renamed(
        ino: ino, from: LinkNames.Name(parent: oldParent, name: oldName),
        to: LinkNames.Name(parent: newParent, name: newName))
    }
    let isDirectory = st.st_mode & S_IFMT == S_IFDIR
    let cached = inodes.existing(backingInode: ino)
    let bytes = cached?.allocated.withLock { $0 } ?? Int64(st.st_blocks) * 512
    let newParent = catalogParent(to)
    // Before the books: an open from now on pins it there.
    if from.domain != to.domain { moveCharge(st, cached: cached, from: from.area, to: to.area) }
    storage.books.withLock { books in
      let catalog = books.catalog
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
