import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Extended attributes
//
// Names are mapped by `XattrNameMapping` (Apple's namespace-less names are kept under
// `user.appbox.x.`); values pass through byte for byte. AppBox's own attributes
// (`AppBoxAttribute`) are checked and interpreted here; other `user.appbox.` names are
// refused (EPERM). Attributes are metadata: never refused for the lock state, except
// changing a class, which needs the current class to be accessible.
//
// POSIX ACLs (`system.posix_acl_access`, `system.posix_acl_default`) are stored on the
// backing file, which keeps the mode in step with an access ACL. They are written with the
// caller's filesystem credentials, so that the backing filesystem clears set-group-ID as
// it would for the caller (ext4 does when the caller is neither in the file's group nor
// privileged; the daemon, as root, would keep it). The kernel caches a node's attributes,
// the mode among them, for 60 s: it drops them after an ACL write itself when it handles
// ACLs (FUSE_POSIX_ACL, which the bridge asks for), and so that no kernel shows an old
// mode, every ACL write also invalidates them before its reply (docs/reference.md,
// "Compared with ext4").

extension SandboxFilesystem {
  /// Runs `body` with the NUL-terminated backing name of `name`.
  ///
  /// Fast path: `security.`, `system.` and `trusted.` names are never reserved and map to
  /// themselves (``XattrNameMapping/backingName(forMountName:)``), so they are passed on
  /// without copying.
  func withBackingXattrName<R>(_ name: FileName, _ body: (UnsafePointer<CChar>) throws(Errno) -> R)
    throws(Errno) -> R
  {
    let c = name.cString
    if strncmp(c, "security.", 9) == 0 || strncmp(c, "system.", 7) == 0 || strncmp(c, "trusted.", 8) == 0 {
      return try body(c)
    }
    let backing = try backingXattrName(name)
    return try backing.withUnsafeBufferPointer { (p) throws(Errno) -> R in try body(p.baseAddress!) }
  }

  /// The backing name of a mount name, NUL-terminated. Refuses (EPERM) names in AppBox's
  /// reserved namespace that it does not document.
  func backingXattrName(_ name: FileName) throws(Errno) -> [CChar] {
    let mountName = name
    if XattrNameMapping.isReserved(mountName) { throw .notPermitted }
    return XattrNameMapping.backingName(forMountName: mountName).map { CChar(bitPattern: $0) } + [0]
  }

  /// `setxattr`. Attributes take space: a value that does not fit in the backing inode
  /// gets a block of its own (ext4), which `du` counts. For a program's attribute a block
  /// is reserved first (purging if it is not free; `ENOSPC` when even a purge leaves no
  /// room); AppBox's own attributes (short values, checked first) reserve nothing. Either
  /// way the change is measured afterwards.
  public func setxattr(
    _ ctx: Caller, node: NodeID, name: FileName, value: UnsafeRawBufferPointer, flags: Int32
  ) throws(Errno) {
    let inode = inodes.inode(node)
    try checkReach(ctx, inode, "setxattr")
    try checkChangeable(inode)
    if let attribute = AppBoxAttribute(name: name) {
      // Reserves nothing: a value that may be refused must not purge first, and a class
      // can be set in a full sandbox. What the value takes is charged when measured.
      return try changingAttributes(inode, valueBytes: 0) { () throws(Errno) in
        try setOwn(attribute, of: inode, to: Array(value), flags: flags)
      }
    }
    if Self.isPOSIXACL(name) {
      try changingAttributes(inode, valueBytes: value.count + name.count) { () throws(Errno) in
        try ctx.asCaller { () throws(Errno) in try Xattr.set(inode.fd, name.cString, value, flags: flags) }
      }
      return aclChanged(node)
    }
    try changingAttributes(inode, valueBytes: value.count + name.count) { () throws(Errno) in
      try withBackingXattrName(name) { (p) throws(Errno) in try Xattr.set(inode.fd, p, value, flags: flags) }
    }
  }

  /// `getxattr`.
  public func getxattr(_ ctx: Caller, node: NodeID, name: FileName) throws(Errno) -> [UInt8] {
    let inode = inodes.inode(node)
    try checkReach(ctx, inode, "getxattr")
    if let attribute = AppBoxAttribute(name: name) { return try own(attribute, of: inode) }
    return try withBackingXattrName(name) { (p) throws(Errno) -> [UInt8] in try Xattr.value(inode.fd, p) }
  }

  /// `listxattr`: every backing name as the mount shows it, except AppBox's internal
  /// ones (such as a class stored automatically at creation), and on the root AppBox's
  /// read-only attributes. So the list is exactly what programs set.
  public func listxattr(_ ctx: Caller, node: NodeID) throws(Errno) -> [UInt8] {
    let inode = inodes.inode(node)
    try checkReach(ctx, inode, "listxattr")
    var list: [UInt8] = []
    for name in try Xattr.names(inode.fd) {
      let shown = XattrNameMapping.mountName(forBackingName: name)
      if XattrNameMapping.isReserved(shown) && AppBoxAttribute(name: shown) == nil { continue }
      list += shown
      list.append(0)
    }
    if inode === inodes.root || inode.isContainerRoot {
      for attribute in AppBoxAttribute.rootAttributes {
        list += Array(attribute.name.utf8)
        list.append(0)
      }
    }
    return list
  }

  /// `removexattr`; the block an attribute had may be freed, so the change is measured.
  public func removexattr(_ ctx: Caller, node: NodeID, name: FileName) throws(Errno) {
    let inode = inodes.inode(node)
    try checkReach(ctx, inode, "removexattr")
    try checkChangeable(inode)
    if let attribute = AppBoxAttribute(name: name) {
      return try changingAttributes(inode, valueBytes: 0) { () throws(Errno) in try removeOwn(attribute, of: inode) }
    }
    if Self.isPOSIXACL(name) {
      try changingAttributes(inode, valueBytes: 0) { () throws(Errno) in
        try ctx.asCaller { () throws(Errno) in try Xattr.remove(inode.fd, name.cString) }
      }
      return aclChanged(node)
    }
    try changingAttributes(inode, valueBytes: 0) { () throws(Errno) in
      try withBackingXattrName(name) { (p) throws(Errno) in try Xattr.remove(inode.fd, p) }
    }
  }

  // MARK: POSIX ACLs

  /// The attributes that hold POSIX ACLs: an access ACL (which also sets the mode's
  /// permission bits) and a directory's default ACL.
  static let posixACLNames: [[UInt8]] = ["system.posix_acl_access", "system.posix_acl_default"].map { Array($0.utf8) }

  /// Whether `name` is one of ``posixACLNames``.
  static func isPOSIXACL(_ name: FileName) -> Bool {
    posixACLNames.contains { name.count == $0.count && name.elementsEqual($0) }
  }

  /// After an ACL write on `node`: the kernel's cached attributes (the mode above all) are
  /// dropped before the reply, so the next `stat` asks again. Attributes only: that takes
  /// no lock the kernel holds for this request (see ``KernelNotifier/invalidateAttributes(_:)``).
  private func aclChanged(_ node: NodeID) {
    notifier.withLock { $0 }?.invalidateAttributes(node)
  }

  // MARK: AppBox's own attributes

  private func own(_ attribute: AppBoxAttribute, of inode: Inode) throws(Errno) -> [UInt8] {
    switch attribute {
    case .protection:
      return Array(protectionClass(of: inode).name.utf8)
    case .purgeUrgency:
      return try Xattr.value(inode.fd, name: attribute.name)
    case .deviceState, .capacity, .availableImportant, .availableOpportunistic:
      guard inode === inodes.root || inode.isContainerRoot else { throw .noData }
      return Array(rootValue(attribute).utf8)
    }
  }

  /// The read-only values on the mount's root.
  private func rootValue(_ attribute: AppBoxAttribute) -> String {
    if attribute == .deviceState { return protection.shown.state.name }
    let (ledger, purgeable, purgeableTmp) = storage.books.withLock {
      ($0.ledger, $0.catalog.totalPurgeableBytes, $0.catalog.purgeableBytes(domain: .tmp))
    }
    switch attribute {
    case .capacity: return String(ledger.capacity)
    case .availableImportant: return String(ledger.importantAvailableCapacity(purgeable: purgeable))
    default: return String(ledger.opportunisticAvailableCapacity(purgeableTmp: purgeableTmp))
    }
  }

  private func setOwn(_ attribute: AppBoxAttribute, of inode: Inode, to value: [UInt8], flags: Int32) throws(Errno) {
    switch attribute {
    case .protection:
      guard inode.isRegularFile || inode.isDirectory else { throw .notPermitted }
      guard let requested = ProtectionClass(parsing: value) else { throw .invalidArgument }
      try checkCanChangeClass(of: inode, to: requested)
      try Xattr.set(inode.fd, name: attribute.name, value: Array(requested.name.utf8), flags: flags)
      reclassified(inode, to: requested)
    case .purgeUrgency:
      guard inode.isRegularFile else { throw .notPermitted }
      let urgency: PurgeUrgency
      do throws(PurgeUrgency.ParseError) { urgency = try PurgeUrgency.parse(attributeValue: value) } catch {
        throw .invalidArgument  // a value that names no urgency is refused, changing nothing
      }
      try Xattr.set(inode.fd, name: attribute.name, value: urgency.attributeValue ?? [], flags: flags)
      storage.books.withLock { _ = $0.catalog.setUrgency(ino: inode.key.inode, urgency) }
    case .deviceState, .capacity, .availableImportant, .availableOpportunistic:
      throw .notPermitted
    }
  }

  /// Refuses (EPERM, counted and logged) a change of a file's class unless both its
  /// current and its new class are accessible now; a directory's class changes always
  /// (``AccessRule/canChangeClass(from:to:isDirectory:state:cxExpired:)``).
  private func checkCanChangeClass(of inode: Inode, to requested: ProtectionClass) throws(Errno) {
    let current = protectionClass(of: inode)
    let snapshot = protection.snapshot
    guard
      !AccessRule.canChangeClass(
        from: current, to: requested, isDirectory: inode.isDirectory, state: snapshot.state,
        cxExpired: snapshot.cxExpired)
    else { return }
    try check(.openExisting, current, path: mountPath(of: inode), in: inode.container)
    try check(.openExisting, requested, path: mountPath(of: inode), in: inode.container)
    throw .notPermitted
  }

  /// Records a new class, accessible when it was checked; if a lock closed it since (the
  /// lock's sweep may have missed the file), drops what the kernel caches of it. Invalidating an
  /// inode takes no lock the kernel holds for this setxattr (unlike entry invalidation),
  /// so it is safe here.
  private func reclassified(_ inode: Inode, to protectionClass: ProtectionClass) {
    inode.cachedProtection = protectionClass
    unreadableClasses.repaired(inode.key)
    if inode.isRegularFile { gateWrites(of: inode) }
    guard inode.isRegularFile, !AccessRule.decide(protectionClass, .handleIO, in: protection.snapshot) else { return }
    guardPassthroughReads(of: inode, closed: true)
    notifier.withLock { $0 }?.invalidateInode(inodes.node(inode))
  }

  private func removeOwn(_ attribute: AppBoxAttribute, of inode: Inode) throws(Errno) {
    switch attribute {
    case .protection:
      // What the item falls back to: the class it inherited, else the mount's default; an
      // inherited record that cannot be used makes it the strictest class.
      let (inherited, name) = storedProtection(of: inode, names: [AppBoxAttribute.inheritedProtectionName])
      let fallback = inherited.protectionClass ?? options.defaultProtection
      try checkCanChangeClass(of: inode, to: fallback)
      try Xattr.remove(inode.fd, name: attribute.name)
      reclassified(inode, to: fallback)
      if inherited.isUnusable { reportUnusableClass(inherited, attribute: name, of: inode) }
    case .purgeUrgency:
      try Xattr.remove(inode.fd, name: attribute.name)
      storage.books.withLock { _ = $0.catalog.setUrgency(ino: inode.key.inode, .none) }
    case .deviceState, .capacity, .availableImportant, .availableOpportunistic:
      throw .notPermitted
    }
  }
}
