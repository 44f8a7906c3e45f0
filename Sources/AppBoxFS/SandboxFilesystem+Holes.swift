import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Holes, and mappings of the backing file
//
// A read-write handle that joins passthrough handles gets the kernel's passthrough mmap: a
// shared mapping of it is a mapping of the backing file, whose writes no request brings
// to the daemon, and which outlives the handle (``WriteMappedFiles``). Such a mapping
// cannot extend the file; it can only fill holes below its end, and each hole it fills
// allocates a block nobody reserved. So no file the kernel may map that way ever has a
// hole below its end: a reader gets passthrough only on a file without holes
// (``mayHaveHoles(_:)``), and while passthrough handles are open on a file, or once a
// read-write handle joined them, every change that would leave a hole allocates it
// instead, within the quota like a write (ENOSPC when it does not fit). See
// docs/architecture.md, "Passthrough and the quota".

extension SandboxFilesystem {
  /// Whether `inode` must have no holes below its end: passthrough handles are open on it
  /// (a read-write handle may join them), or a read-write handle joined them
  /// (``WriteMappedFiles``). `mode` is its ``IOMode``, read under its lock.
  func keepsHolesFilled(_ inode: Inode, _ mode: IOMode) -> Bool {
    mode.backing != nil || writeMapped.contains(inode.key)
  }

  /// Runs a change of `inode` that may leave holes below its end (a truncate up, a write
  /// or an allocation past its end, a hole punched). `change` is told whether it must
  /// fill them (``keepsHolesFilled(_:_:)``); when it need not, no passthrough is
  /// registered on the file until it is done, so that a registration sees the holes it
  /// left (``mayHaveHoles(_:)``). Without passthrough (under the writeback cache the kernel
  /// allows none), and with no file left that was opened that way, neither is needed.
  func changingExtent<T>(_ inode: Inode, _ change: (_ fillHoles: Bool) throws(Errno) -> T) throws(Errno) -> T {
    if !passthrough.isAvailable, passthroughFiles.load(ordering: .acquiring) == 0, writeMapped.count == 0 {
      return try change(false)
    }
    let fill = inode.ioMode.withLock { mode -> Bool in
      if keepsHolesFilled(inode, mode) { return true }
      mode.holesInMaking += 1
      return false
    }
    defer { if !fill { inode.ioMode.withLock { $0.holesInMaking -= 1 } } }
    return try change(fill)
  }

  /// Runs `change`, a write (or copy) through `fd` at `offset`, as a change that may leave a
  /// hole between the file's end and `offset` when `offset` lies past the end the file was
  /// last measured at; in a file that must have none, that gap is allocated first.
  /// - Throws: ENOSPC when the gap does not fit (then nothing is written), or the
  ///   allocation's error.
  func writingAt<T>(_ inode: Inode, fd: Int32, offset: off_t, _ change: () throws(Errno) -> T) throws(Errno) -> T {
    guard inode.isRegularFile, Int64(offset) > inode.measuredSize.load(ordering: .relaxed) else { return try change() }
    return try changingExtent(inode) { (fill) throws(Errno) -> T in
      if fill {
        let size = try Sys.fstat(fd).st_size
        if offset > size { try fillHoles(inode, fd: fd, offset: size, length: offset - size) }
      }
      return try change()
    }
  }

  /// Allocates `length` bytes of `inode` at `offset` through `fd` without changing its
  /// size (a hole becomes an unwritten extent, which reads as zeros as the hole did),
  /// within the quota: all or nothing.
  /// - Throws: ENOSPC when it does not fit, or `fallocate`'s error (what it allocated
  ///   before failing is measured and charged).
  func fillHoles(_ inode: Inode, fd: Int32, offset: off_t, length: off_t) throws(Errno) {
    guard length > 0 else { return }
    let start = AllocationBlocks.roundDown(Int64(offset))
    let end = AllocationBlocks.roundUp(Int64(offset) + Int64(length))
    let reservation = try reserveAll(AllocationBlocks.withMetadata(end - start), area: inode.area)
    inode.mayReshapeAtWriteBack.store(true, ordering: .relaxed)  // unwritten extents
    do throws(Errno) { try Sys.fallocate(fd, Linux.fallocKeepSize, offset, length) } catch {
      settle(reservation, inode, fd: fd)  // a full backing fails after allocating part
      throw error
    }
    settle(reservation, inode, fd: fd)
  }

  /// Whether the file open as `fd` may have holes below its end, which a mapping of its
  /// backing file could fill unseen: a hole `SEEK_HOLE` finds (which reports allocated
  /// extents not yet written as holes too), or fewer bytes allocated than its size (a
  /// hole misses a whole block; a small file stored inline, as btrfs does, misses none),
  /// which catches a filesystem that cannot report holes (its `SEEK_HOLE` finds none).
  /// That count is measured twice before it decides: ext4 takes a delayed allocation out
  /// of the count it reports a moment before it adds the blocks, while it writes the file
  /// back. A file that cannot be examined counts as having holes: it is then not opened
  /// for passthrough, and its reads go through the daemon, which is always safe.
  func mayHaveHoles(_ fd: Int32) -> Bool {
    do throws(Errno) {
      let st = try Sys.fstat(fd)
      guard st.st_size > 0 else { return false }
      if try Sys.lseek(fd, 0, Linux.seekHole) < st.st_size { return true }
      if Int64(st.st_blocks) * 512 >= Int64(st.st_size) { return false }
      let again = try Sys.fstat(fd)
      return Int64(again.st_blocks) * 512 < Int64(again.st_size)
    } catch {
      return true
    }
  }

  /// `setattr` of a regular file's size. A file that must have no holes
  /// (``keepsHolesFilled(_:_:)``) has its growth allocated first, within the quota
  /// (ENOSPC when it does not fit, and the size is unchanged); any other grows by a hole,
  /// as on the backing filesystem.
  func resize(_ inode: Inode, openFD: Int32?, to size: off_t) throws(Errno) {
    try changingExtent(inode) { (fill) throws(Errno) in
      try withWritable(inode, openFD: openFD) { (fd) throws(Errno) in
        if fill {
          let before = try Sys.fstat(fd).st_size
          if size > before { try fillHoles(inode, fd: fd, offset: before, length: size - before) }
        }
        try Sys.ftruncate(fd, size)
      }
    }
    account(inode, fd: inode.fd)
  }

  /// Runs `body` with the open handle's descriptor, or a short-lived writable one (a
  /// truncate by path).
  private func withWritable(_ inode: Inode, openFD: Int32?, _ body: (Int32) throws(Errno) -> Void) throws(Errno) {
    if let openFD { return try body(openFD) }
    let fd = try Sys.reopen(inode.fd, flags: O_WRONLY | O_CLOEXEC)
    defer { Sys.close(fd) }
    try body(fd)
  }

  /// A `fallocate` of `inode` through `fd` in `mode` at `offset` for `length` bytes, as
  /// ``fallocate(_:node:handle:mode:offset:length:)`` makes it: in a file that must have
  /// no holes, a punched hole is zeroed instead (the same bytes, the blocks kept), an
  /// allocation past the end allocates the gap before it first, and inserting a range
  /// (a hole) is refused (EOPNOTSUPP, which programs take as "not here").
  /// - Returns: the mode to use.
  func holeFreeAllocation(_ inode: Inode, fd: Int32, mode: Int32, offset: off_t, fill: Bool) throws(Errno) -> Int32 {
    guard fill else { return mode }
    if mode & Linux.fallocInsertRange != 0 { throw .notSupported }
    if mode & Linux.fallocPunchHole != 0 { return mode & ~Linux.fallocPunchHole | Linux.fallocZeroRange }
    if mode & Linux.fallocKeepSize == 0 {
      let size = try Sys.fstat(fd).st_size
      if offset > size { try fillHoles(inode, fd: fd, offset: size, length: offset - size) }
    }
    return mode
  }

  /// Whether a `fallocate` in `mode` at `offset` may leave holes below the file's end: a
  /// hole punched or a range inserted, or an allocation that extends the file past the
  /// end it was last measured at.
  func mayLeaveHoles(_ inode: Inode, mode: Int32, offset: off_t) -> Bool {
    mode & (Linux.fallocPunchHole | Linux.fallocInsertRange) != 0
      || (mode & Linux.fallocKeepSize == 0 && Int64(offset) > inode.measuredSize.load(ordering: .relaxed))
  }
}
