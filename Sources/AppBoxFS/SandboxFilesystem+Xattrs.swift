import FuseBridge
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Extended attributes
//
// Names are mapped by `XattrNameMapping` (Apple's namespace-less names are kept under
// `user.appbox.x.`); values pass through byte for byte.

extension SandboxFilesystem {
  /// Runs `body` with the NUL-terminated backing name of `name`.
  ///
  /// Fast path: `security.`, `system.` and `trusted.` names are never reserved and map to
  /// themselves (``XattrNameMapping/backingName(forMountName:)``), so they are passed on
  /// without copying. The kernel asks for `security.capability` before every write to a
  /// file (to strip capabilities), so this is on the write path.
  func withBackingXattrName<R>(_ name: UnsafePointer<CChar>, _ body: (UnsafePointer<CChar>) throws(Errno) -> R)
    throws(Errno) -> R
  {
    if strncmp(name, "security.", 9) == 0 || strncmp(name, "system.", 7) == 0 || strncmp(name, "trusted.", 8) == 0 {
      return try body(name)
    }
    let backing = try backingXattrName(name)
    return try backing.withUnsafeBufferPointer { (p) throws(Errno) -> R in try body(p.baseAddress!) }
  }

  /// The backing name of a mount name, NUL-terminated. Refuses (EPERM) names in AppBox's
  /// reserved namespace that it does not document.
  func backingXattrName(_ name: UnsafePointer<CChar>) throws(Errno) -> [CChar] {
    let mountName = CName(name)
    if XattrNameMapping.isReserved(mountName) { throw .notPermitted }
    return XattrNameMapping.backingName(forMountName: mountName).map { CChar(bitPattern: $0) } + [0]
  }

  /// `setxattr`.
  public func setxattr(
    _ ctx: RequestContext, node: NodeID, name: UnsafePointer<CChar>, value: UnsafeRawBufferPointer, flags: Int32
  ) throws(Errno) {
    let inode = inodes.inode(node)
    try withBackingXattrName(name) { (p) throws(Errno) in try Xattr.set(inode.fd, p, value, flags: flags) }
  }

  /// `getxattr`.
  public func getxattr(_ ctx: RequestContext, node: NodeID, name: UnsafePointer<CChar>) throws(Errno) -> [UInt8] {
    let inode = inodes.inode(node)
    return try withBackingXattrName(name) { (p) throws(Errno) -> [UInt8] in try Xattr.value(inode.fd, p) }
  }

  /// `listxattr`: every backing name, as the mount shows it.
  public func listxattr(_ ctx: RequestContext, node: NodeID) throws(Errno) -> [UInt8] {
    var list: [UInt8] = []
    for name in try Xattr.names(inodes.inode(node).fd) {
      list += XattrNameMapping.mountName(forBackingName: name)
      list.append(0)
    }
    return list
  }

  /// `removexattr`.
  public func removexattr(_ ctx: RequestContext, node: NodeID, name: UnsafePointer<CChar>) throws(Errno) {
    let inode = inodes.inode(node)
    try withBackingXattrName(name) { (p) throws(Errno) in try Xattr.remove(inode.fd, p) }
  }
}
