import FuseBridge
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Creating, removing, renaming and linking names

extension SandboxFilesystem {
  /// `mknod` (regular files, fifos, sockets; devices when the caller may): +1 lookup.
  public func mknod(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>, mode: mode_t, device: dev_t)
    throws(Errno) -> Entry
  {
    let directory = inodes.inode(parent)
    try checkCanCreate(in: directory)
    try ctx.asCaller { () throws(Errno) in try Sys.mknodat(directory.fd, name, mode, device) }
    return try lookupEntry(in: directory, name: name)
  }

  /// `mkdir`: +1 lookup.
  public func mkdir(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>, mode: mode_t) throws(Errno)
    -> Entry
  {
    let directory = inodes.inode(parent)
    try checkCanCreate(in: directory)
    try ctx.asCaller { () throws(Errno) in try Sys.mkdirat(directory.fd, name, mode) }
    return try lookupEntry(in: directory, name: name)
  }

  /// `symlink`: +1 lookup. The target is stored as given; the daemon never follows it.
  public func symlink(_ ctx: RequestContext, target: UnsafePointer<CChar>, parent: NodeID, name: UnsafePointer<CChar>)
    throws(Errno) -> Entry
  {
    let directory = inodes.inode(parent)
    try checkCanCreate(in: directory)
    try ctx.asCaller { () throws(Errno) in try Sys.symlinkat(target, directory.fd, name) }
    return try lookupEntry(in: directory, name: name)
  }

  /// `unlink`.
  public func unlink(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>) throws(Errno) {
    let directory = inodes.inode(parent)
    try checkCanRemove(name, in: directory)
    try Sys.unlinkat(directory.fd, name, 0)
  }

  /// `rmdir`.
  public func rmdir(_ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>) throws(Errno) {
    let directory = inodes.inode(parent)
    try checkCanRemove(name, in: directory)
    try Sys.unlinkat(directory.fd, name, AT_REMOVEDIR)
  }

  /// `rename`, with `RENAME_NOREPLACE` and `RENAME_EXCHANGE`. Fixed directories can be
  /// neither source nor target.
  public func rename(
    _ ctx: RequestContext, parent: NodeID, name: UnsafePointer<CChar>, newParent: NodeID,
    newName: UnsafePointer<CChar>, flags: UInt32
  ) throws(Errno) {
    let from = inodes.inode(parent)
    let to = inodes.inode(newParent)
    try checkCanRemove(name, in: from)
    try checkCanRemove(newName, in: to)
    try checkCanCreate(in: to)
    try Sys.renameat2(from.fd, name, to.fd, newName, flags)
  }

  /// `link`: +1 lookup on the linked node.
  public func link(_ ctx: RequestContext, node: NodeID, newParent: NodeID, newName: UnsafePointer<CChar>) throws(Errno)
    -> Entry
  {
    let inode = inodes.inode(node)
    let directory = inodes.inode(newParent)
    try checkCanCreate(in: directory)
    try Sys.link(inode.fd, directory.fd, newName)
    return try lookupEntry(in: directory, name: newName)
  }
}
