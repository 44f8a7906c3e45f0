import CFuse
import FilesystemInterface

/// libfuse's cache notifications for the session (`fuse_lowlevel_notify_*`).
struct FuseKernelNotifier: KernelNotifier, @unchecked Sendable {
  // @unchecked: the session pointer is only used for libfuse's notify calls, which are
  // thread-safe, and stays valid until the session ends (after the loop has returned).
  let session: OpaquePointer

  func invalidateEntry(parent: NodeID, name: [UInt8]) -> Int32 {
    name.withUnsafeBufferPointer {
      $0.withMemoryRebound(to: CChar.self) {
        fuse_lowlevel_notify_inval_entry(session, parent.rawValue, $0.baseAddress, $0.count)
      }
    }
  }

  func delete(parent: NodeID, child: NodeID, name: [UInt8]) -> Int32 {
    name.withUnsafeBufferPointer {
      $0.withMemoryRebound(to: CChar.self) {
        fuse_lowlevel_notify_delete(session, parent.rawValue, child.rawValue, $0.baseAddress, $0.count)
      }
    }
  }

  func invalidateInode(_ node: NodeID, offset: Int64, length: Int64) -> Int32 {
    fuse_lowlevel_notify_inval_inode(session, node.rawValue, off_t(offset), off_t(length))
  }
}
