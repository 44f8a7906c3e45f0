/// Tells the kernel to forget what it cached, after the filesystem changed something
/// behind its back (a purge) or must stop serving cached content (a lock). The FUSE bridge
/// implements it with libfuse's notifications; tests record the calls.
///
/// Never call it from a thread that is serving a request on a related node: the kernel
/// may wait for that request while holding locks the notification needs (the one
/// exception: ``invalidateAttributes(_:)``).
public protocol KernelNotifier: Sendable {
  /// Drops the cached name `name` in `parent` (and the child's dentry).
  /// - Returns: 0, or a negative errno (e.g. `-ENOENT`: nothing was cached).
  @discardableResult
  func invalidateEntry(parent: NodeID, name: [UInt8]) -> Int32

  /// Tells the kernel that `name` in `parent`, which was `child`, is gone.
  /// - Returns: 0, or a negative errno.
  @discardableResult
  func delete(parent: NodeID, child: NodeID, name: [UInt8]) -> Int32

  /// Writes back and drops the cached pages (and attributes) of `node`. The kernel waits
  /// for every page of the range that a request in flight holds locked.
  /// - Parameters:
  ///   - offset: first byte; negative: attributes only, no page.
  ///   - length: bytes from `offset`, 0 (or negative) for all to the end of the file.
  /// - Returns: 0, or a negative errno.
  @discardableResult
  func invalidateInode(_ node: NodeID, offset: Int64, length: Int64) -> Int32
}

extension KernelNotifier {
  /// Writes back and drops all cached pages (and attributes) of `node`.
  @discardableResult
  public func invalidateInode(_ node: NodeID) -> Int32 { invalidateInode(node, offset: 0, length: 0) }

  /// Drops the cached attributes of `node` (its mode, size, times; not its pages), so that
  /// the next `stat` or permission check asks the filesystem again. The kernel only marks
  /// them stale, under a spinlock: it waits for no request, so a handler may call this for
  /// the node it is serving, before its reply.
  @discardableResult
  public func invalidateAttributes(_ node: NodeID) -> Int32 { invalidateInode(node, offset: -1, length: 0) }
}
