import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Creating, removing, renaming and linking names
//
// Layout: nothing new at an app container's root or in a device's own directories; fixed
// directories (and containers, and their metadata files) are never removed, renamed or
// replaced. Nothing moves or links between a device's containers (EXDEV). Domains: files and directories move (and are exchanged) between
// domains with one rename, their bytes with them (a directory: `+DomainMoves`), unless a
// file has a link that would stay behind (links stay within a domain: EXDEV).

extension SandboxFilesystem {
  /// `mknod` (regular files, fifos, sockets; devices when the caller may): +1 lookup.
  public func mknod(_ ctx: Caller, parent: NodeID, name: FileName, mode: mode_t, device: dev_t)
    throws(Errno) -> Entry
  {
    let directory = inodes.inode(parent)
    try checkReach(ctx, directory, "mknod")
    try checkCanCreate(in: directory)
    try admitNewInode(for: ctx)
    let isRegular = mode & S_IFMT == S_IFREG
    let inherited = protectionClass(of: directory)
    if isRegular { try check(.createNew, inherited, path: mountPath(of: name, in: directory), in: directory.container) }
    let room = try reserveRoom(in: directory)
    try ctx.asCreator(mode: mode) { (mode) throws(Errno) in try Sys.mknodat(directory.fd, name.cString, mode, device) }
    return try created(
      name, in: directory, protection: isRegular ? inherited : nil, reserved: reserve(0, area: directory.area),
      room: room)
  }

  /// `mkdir`: +1 lookup. The new directory takes its parent's class.
  public func mkdir(_ ctx: Caller, parent: NodeID, name: FileName, mode: mode_t) throws(Errno)
    -> Entry
  {
    let directory = inodes.inode(parent)
    try checkReach(ctx, directory, "mkdir")
    try checkCanCreate(in: directory)
    try admitNewInode(for: ctx)
    let reservation = try reserveAll(AllocationBlocks.size, area: directory.area)  // its own block
    let room = try reserveRoom(in: directory)
    try ctx.asCreator(mode: mode) { (mode) throws(Errno) in try Sys.mkdirat(directory.fd, name.cString, mode) }
    return try created(
      name, in: directory, protection: protectionClass(of: directory), reserved: reservation, room: room)
  }

  /// `symlink`: +1 lookup. The target is stored as given; the daemon never follows it.
  public func symlink(_ ctx: Caller, target: FileName, parent: NodeID, name: FileName)
    throws(Errno) -> Entry
  {
    let directory = inodes.inode(parent)
    try checkReach(ctx, directory, "symlink")
    try checkCanCreate(in: directory)
    try admitNewInode(for: ctx)
    let room = try reserveRoom(in: directory)
    try ctx.asCaller { () throws(Errno) in try Sys.symlinkat(target.cString, directory.fd, name.cString) }
    return try created(name, in: directory, protection: nil, reserved: reserve(0, area: directory.area), room: room)
  }

  /// Looks up what was just created, gives it its class, and puts it on the books.
  /// `openFD`: the new file's open descriptor (`create`), whose handle is counted before
  /// the file goes on the catalog, so no purge can take it before the create returns.
  /// `reserved`: for the new item; `room`: for the directory's growth (``reserveRoom(in:)``).
  func created(
    _ name: FileName, in directory: Inode, protection: ProtectionClass?,
    reserved: consuming Reservation, room: consuming Reservation, openFD: Int32? = nil
  ) throws(Errno) -> Entry {
    let entry: Entry
    do throws(Errno) { entry = try lookupEntry(in: directory, name: name) } catch {
      // Not looked up, it could not be given its class: undo the create (see below).
      removeCreated(name, in: directory, because: error)
      settle(room, directory, fd: directory.fd)
      throw error
    }
    let inode = inodes.inode(entry.node)
    let storedAttribute: Bool
    do throws(Errno) {
      storedAttribute =
        try protection.map { (c) throws(Errno) in try assignProtection(c, to: inode, openFD: openFD) }
        ?? false
    } catch {
      // Without its class the item would fall back to the default one: undo the create.
      removeCreated(name, in: directory, isDirectory: inode.isDirectory, because: error)
      forget(entry.node, count: 1)
      reserved.cancel()
      settle(room, directory, fd: directory.fd)
      throw error
    }
    if openFD != nil { inode.openHandles.add(1, ordering: .relaxed) }
    // The books hold nothing for the new file yet, though its node started from its
    // lookup's allocation; a measurement since (another client's, by the name) charged
    // only its difference to that.
    inode.allocated.withLock { $0 -= inode.initialCharge }
    // The lookup's status holds unless an attribute was written since (it may take a block).
    settle(reserved, inode, fd: openFD ?? inode.fd, lookedUp: storedAttribute ? nil : entry.attributes)
    settle(room, directory, fd: directory.fd)
    track(inode, name: name.bytes, in: directory)
    if inode.isRegularFile, directory.domain.isPurgeable, notePurgeCost(.recreated, name, in: directory) {
      inode.recreatesPurged.store(true, ordering: .relaxed)
      if openFD == nil { countWrittenAgain(inode) }  // mknod: nothing will be written through a handle of its own
    }
    return entry
  }

  /// Removes `name`, just created in `directory`, when the create cannot be completed
  /// (`error`): no item is left without its class. Logged when even that fails.
  /// - Parameter isDirectory: what the item is, if known (else a file is tried first).
  private func removeCreated(_ name: FileName, in directory: Inode, isDirectory: Bool? = nil, because error: Errno) {
    do throws(Errno) {
      do throws(Errno) {
        try Sys.unlinkat(directory.fd, name.cString, isDirectory == true ? AT_REMOVEDIR : 0)
      } catch let unlinked where isDirectory == nil && unlinked == .isDirectory {
        try Sys.unlinkat(directory.fd, name.cString, AT_REMOVEDIR)
      }
    } catch let kept {
      log("create: cannot finish \(String(decoding: name.bytes, as: UTF8.self)) (\(error)) nor remove it (\(kept))")
    }
  }

  /// Reserves a block for the growth of `directory` by one more name (ENOSPC when even
  /// that does not fit, after purging), settled when the directory is measured.
  func reserveRoom(in directory: Inode) throws(Errno) -> Reservation {
    try reserveAll(AllocationBlocks.size, area: directory.area)
  }

  /// Settles `directory`'s charge after a name left it (unlink, rmdir, a rename away): a
  /// measurement, unless the backing filesystem keeps a directory's allocation when a name
  /// leaves it (``removalsKeepDirectorySize``; a directory on the backing root's own
  /// filesystem): then the charge already is what the directory holds, as its last
  /// measurement, after whatever made it grow, found it.
  func accountRemoval(from directory: Inode) {
    if removalsKeepDirectorySize, directory.key.device == inodes.root.key.device { return }
    account(directory, fd: directory.fd)
  }

  /// `unlink`.
  public func unlink(_ ctx: Caller, parent: NodeID, name: FileName) throws(Errno) {
    let directory = inodes.inode(parent)
    try checkReach(ctx, directory, "unlink")
    try checkCanRemove(name, in: directory)
    let st = try Sys.fstatat(directory.fd, name.cString, AT_SYMLINK_NOFOLLOW)
    let held = inodes.existing(backingInode: UInt64(st.st_ino))  // before its number is free again
    try Sys.unlinkat(directory.fd, name.cString, 0)
    untrack(st, name: name, in: directory, held: held)
    accountRemoval(from: directory)
  }

  /// `rmdir`.
  public func rmdir(_ ctx: Caller, parent: NodeID, name: FileName) throws(Errno) {
    let directory = inodes.inode(parent)
    try checkReach(ctx, directory, "rmdir")
    try checkCanRemove(name, in: directory)
    let st = try Sys.fstatat(directory.fd, name.cString, AT_SYMLINK_NOFOLLOW)
    let held = inodes.existing(backingInode: UInt64(st.st_ino))  // before its number is free again
    try Sys.unlinkat(directory.fd, name.cString, AT_REMOVEDIR)
    untrack(st, name: name, in: directory, held: held)
    accountRemoval(from: directory)
  }

  /// `rename`, with `RENAME_NOREPLACE` and `RENAME_EXCHANGE`.
  public func rename(
    _ ctx: Caller, parent: NodeID, name: FileName, newParent: NodeID,
    newName: FileName, flags: UInt32
  ) throws(Errno) {
    let from = inodes.inode(parent)
    let to = inodes.inode(newParent)
    try checkReach(ctx, from, "rename")
    try checkReach(ctx, to, "rename")
    try checkCanRemove(name, in: from)
    try checkCanRemove(newName, in: to)
    try checkCanCreate(in: to)
    try checkSameContainer(from, to)
    let source = try Sys.fstatat(from.fd, name.cString, AT_SYMLINK_NOFOLLOW)
    // Only ENOENT means "no target": a target that cannot be looked at could be a file
    // with links elsewhere, or charged bytes the books would keep, so the rename is refused.
    let target: stat?
    do throws(Errno) {
      target = try Sys.fstatat(to.fd, newName.cString, AT_SYMLINK_NOFOLLOW)
    } catch  where error == .noEntry {
      target = nil
    }
    let exchange = flags & Linux.renameExchange != 0
    if from.domain != to.domain {
      // A file with other links would leave them behind (hard links stay within a domain,
      // so its bytes are charged to one); a directory takes its subtree's books along.
      let moves = [source] + (exchange ? target.map { [$0] } ?? [] : [])
      if moves.contains(where: { $0.st_mode & S_IFMT != S_IFDIR && $0.st_nlink > 1 }) { throw .crossDevice }
      if moves.contains(where: { $0.st_mode & S_IFMT == S_IFDIR }) {
        try renameAcrossDomains(
          from: from, name: name, to: to, newName: newName, flags: flags, source: source, target: target)
        return
      }
    }
    // The target directory may grow by a name; a full sandbox does not refuse a rename for
    // it (what it cannot reserve is purged afterwards, if anything is purgeable), but one
    // already above its capacity does, to a new name: renames alone could otherwise grow
    // directories without end (every name moved into a fresh directory grows it; ext4
    // never shrinks one), each settled above the capacity.
    let room = reserve(AllocationBlocks.size, area: to.area)
    if target == nil, !exchange, room.bytes < AllocationBlocks.size,
      storage.books.withLock({ $0.ledger.used > $0.ledger.capacity })
    {
      room.cancel()
      storage.countNoSpace()
      throw .noSpace
    }
    let heldTarget = target.flatMap { inodes.existing(backingInode: UInt64($0.st_ino)) }  // before it is replaced
    try Sys.renameat2(from.fd, name.cString, to.fd, newName.cString, flags)
    if exchange, let target {
      moved(source, from: name.bytes, in: from, to: newName.bytes, in: to)
      moved(target, from: newName.bytes, in: to, to: name.bytes, in: from)
    } else if target?.st_ino != source.st_ino {  // two names of one file: nothing moves
      if let target { untrack(target, name: newName, in: to, held: heldTarget) }
      moved(source, from: name.bytes, in: from, to: newName.bytes, in: to)
    }
    if to !== from { accountRemoval(from: from) }
    settle(room, to, fd: to.fd)
    // A file written elsewhere and renamed into place (an atomic write) re-creates the name.
    if to.domain.isPurgeable, source.st_mode & S_IFMT == S_IFREG, notePurgeCost(.recreated, newName, in: to) {
      purgeCost.bytesWrittenAgain.add(Int64(source.st_blocks) * 512, ordering: .relaxed)
    }
  }

  /// `link`: +1 lookup on the linked node. Links stay within one domain (EXDEV otherwise).
  public func link(_ ctx: Caller, node: NodeID, newParent: NodeID, newName: FileName) throws(Errno)
    -> Entry
  {
    let inode = inodes.inode(node)
    let directory = inodes.inode(newParent)
    try checkReach(ctx, inode, "link")
    try checkReach(ctx, directory, "link")
    try checkCanCreate(in: directory)
    try checkChangeable(inode)
    try checkSameContainer(inode, directory)
    if inode.domain != directory.domain { throw .crossDevice }
    // Pinned while the name is added, as an open pins its file: a purge that checked the
    // file's single link and is about to unlink its name would otherwise leave it alive
    // under the new name, its bytes off the books. A purge under way is waited for
    // (ESTALE once it unlinked the file: the kernel looks the name up again).
    try pin(inode)
    defer { unpin(inode) }
    let room = try reserveRoom(in: directory)
    try Sys.link(inode.fd, directory.fd, newName.cString)
    linked(inode, as: newName.bytes, in: directory)
    settle(room, directory, fd: directory.fd)
    return try lookupEntry(in: directory, name: newName)
  }
}
