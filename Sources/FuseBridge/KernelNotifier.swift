import CFuse

/// Tells the kernel to forget what it cached, after the filesystem changed something
/// behind its back (a purge) or must stop serving cached content (a lock).
///
/// Never call it from a thread that is serving a request on a related node: the kernel
/// may wait for that request while holding locks the notification needs.
public struct KernelNotifier: @unchecked Sendable {
  // @unchecked: the session pointer is only used for libfuse's notify calls, which are
  // thread-safe, and stays valid until the session ends (after the loop has returned).
  let session: OpaquePointer

  /// Drops the cached name `name` in `parent` (and the child's dentry).
  @discardableResult
  public func invalidateEntry(parent: NodeID, name: [UInt8]) -> Int32 {
    name.withUnsafeBufferPointer {
      $0.withMemoryRebound(to: CChar.self) {
        fuse_lowlevel_notify_inval_entry(session, parent.rawValue, $0.baseAddress, $0.count)
      }
    }
  }

  /// Tells the kernel that `name` in `parent`, which was `child`, is gone.
  @discardableResult
  public func delete(parent: NodeID, child: NodeID, name: [UInt8]) -> Int32 {
    name.withUnsafeBufferPointer {
      $0.withMemoryRebound(to: CChar.self) {
        fuse_lowlevel_notify_delete(session, parent.rawValue, child.rawValue, $0.baseAddress, $0.count)
      }
    }
  }

  /// Writes back and drops the cached pages (and attributes) of `node`.
  /// - Parameters:
  ///   - offset: first byte; with `length` 0, to the end of the file.
  ///   - length: bytes, 0 for all; negative: attributes only.
  @discardableResult
  public func invalidateInode(_ node: NodeID, offset: Int64 = 0, length: Int64 = 0) -> Int32 {
    fuse_lowlevel_notify_inval_inode(session, node.rawValue, off_t(offset), off_t(length))
  }
}
