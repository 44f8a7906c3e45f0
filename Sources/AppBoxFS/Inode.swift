import FuseBridge
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Identifies a backing inode: device and inode number.
struct BackingKey: Hashable, Sendable {
  let device: UInt64
  let inode: UInt64

  init(_ st: stat) {
    device = UInt64(st.st_dev)
    inode = UInt64(st.st_ino)
  }
}

/// One node the kernel knows: an `Linux.openPath` descriptor on its backing inode, through which
/// every operation on it goes (no path is ever resolved again).
final class Inode: Sendable {
  /// `Linux.openPath | O_NOFOLLOW` descriptor of the backing inode, closed on deinit.
  let fd: Int32
  /// The backing inode.
  let key: BackingKey
  /// `S_IFMT` bits; a backing inode never changes type.
  let fileType: mode_t
  /// Which fixed directory of the layout this is, if any.
  let fixed: SandboxLayout.FixedDirectory?
  /// Lookups the kernel holds; changed only under ``InodeTable``'s lock.
  let lookups: Atomic<UInt64>
  /// Open file handles on this inode.
  let openHandles: Atomic<Int32>

  init(fd: Int32, attributes: stat, fixed: SandboxLayout.FixedDirectory?, lookups: UInt64) {
    self.fd = fd
    self.key = BackingKey(attributes)
    self.fileType = attributes.st_mode & S_IFMT
    self.fixed = fixed
    self.lookups = Atomic(lookups)
    self.openHandles = Atomic(0)
  }

  deinit { Sys.close(fd) }

  var isDirectory: Bool { fileType == S_IFDIR }
  var isSymlink: Bool { fileType == S_IFLNK }
}
