import CFuseDevice
import FilesystemInterface

/// Registers backing files for passthrough opens (Linux ≥ 6.9, a daemon with
/// CAP_SYS_ADMIN) on `/dev/fuse`. Thread-safe; the process's one session decides
/// availability at INIT.
struct FusePassthroughFiles: PassthroughFiles {
  /// True once the kernel agreed to passthrough at INIT (always false before).
  var isAvailable: Bool { cfuse_device_negotiated() & UInt32(CFUSE_DEVICE_PASSTHROUGH) != 0 }

  /// Registers `fd` (an open backing file; the kernel takes its own reference).
  /// - Returns: nil when the kernel refuses (then `isAvailable` turns false: the daemon
  ///   lacks CAP_SYS_ADMIN, or the backing filesystem cannot be stacked on).
  func register(_ fd: Int32) -> BackingID? {
    let id = cfuse_device_backing_open(fd)
    return id > 0 ? BackingID(rawValue: id) : nil
  }

  /// Drops the registration (open files that use it keep it until they are released).
  func unregister(_ id: BackingID) {
    cfuse_device_backing_close(id.rawValue)
  }
}
