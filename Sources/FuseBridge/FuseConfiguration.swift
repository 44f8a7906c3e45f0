import CFuse
import CFuseDevice
import FilesystemInterface

#if canImport(Glibc)
  import Glibc
#endif

/// How the session asks the kernel to cache and batch.
public struct FuseConfiguration: Sendable {
  /// How long the kernel may cache names and attributes (the filesystem's replies say).
  public var timeouts = CacheTimeouts()
  /// Largest write request, in bytes.
  public var maxWrite: UInt32 = 1 << 20
  /// Largest read request, in bytes (0: the kernel's). libfuse wants it both here, for
  /// the INIT reply, and as the mount option `max_read=`; INIT fails when they differ.
  public var maxRead: UInt32 = 0
  /// Largest read-ahead, in bytes.
  public var maxReadahead: UInt32 = 1 << 20
  /// Worker threads libfuse may keep busy at once.
  public var maxThreads: UInt32 = 16
  /// Idle worker threads libfuse keeps around.
  public var maxIdleThreads: UInt32 = 8
  /// Ask the kernel for FUSE passthrough (Linux ≥ 6.9; registering backing files also
  /// needs CAP_SYS_ADMIN). The filesystem decides which opens use it.
  public var passthrough = true
  /// Microseconds the reader polls for the next request before it sleeps, while requests
  /// come back to back (0: never poll). See CFuseDevice's busy_poll.c.
  public var busyPollMicroseconds = busyPollWindow
  /// How requests should reach the daemon; io_uring falls back to `/dev/fuse` when the
  /// kernel or the host refuses it (the session's ``FuseDriver/transport`` says which).
  /// io_uring by default: it won every row the daemon takes part in, in the same
  /// benchmark run (bench/README.md).
  public var transport = RequestTransport.ioUring
  /// io_uring: a worker sends its reply as a SCHED_IDLE thread, so that the program it
  /// wakes stays on its CPU, where the host allows it. See CFuseDevice's handoff.c.
  public var cpuHandoff = true
  /// Why io_uring, though asked for, must not be used on this mount (nil: it may).
  public var ioUringRefusal: String?
  /// Ask the kernel for its writeback cache (`--write-cache`): writes stay in its page
  /// cache until it writes them back. The kernel then refuses passthrough for the whole
  /// mount, and the filesystem decides which opens use the cache (docs/architecture.md).
  public var writeCache = false

  /// The busy-poll window where the program and the daemon can run at the same time.
  static let busyPollWindow: UInt32 = 30

  /// The busy-poll window for a daemon that may run on `availableCPUs` CPUs: none on a
  /// single CPU, where the program waits while the daemon polls.
  public static func defaultBusyPoll(availableCPUs: Int) -> UInt32 { availableCPUs > 1 ? busyPollWindow : 0 }

  /// The defaults.
  public init() {}

  func apply(to conn: UnsafeMutablePointer<fuse_conn_info>) {
    var want = conn.pointee.want
    let capable = conn.pointee.capable
    // Attributes with listings: one round trip instead of a lookup per entry.
    want |= capable & (cfuse_cap_readdirplus() | cfuse_cap_readdirplus_auto())
    want |= capable & cfuse_cap_parallel_dirops()
    want |= capable & cfuse_cap_cache_symlinks()
    // Without the writeback cache every write reaches the daemon as it is made, where the
    // lock state and the quota decide it; with it, only writes through handles the
    // filesystem opens for direct I/O do (SandboxFilesystem.opened).
    if writeCache {
      want |= capable & cfuse_cap_writeback_cache()
    } else {
      want &= ~cfuse_cap_writeback_cache()
    }
    // The kernel drops cached pages whose mtime changed (cheap, keeps mmap coherent).
    want |= capable & cfuse_cap_auto_inval_data()
    // Modes of new files arrive without the caller's umask, which comes beside them: the
    // daemon applies it as a local filesystem does, not under a default ACL
    // (Caller.asCreator).
    want |= capable & cfuse_cap_dont_mask()
    // POSIX ACLs count in permission checks (default_permissions checks mode bits alone
    // otherwise: an ACL entry that denies a user or narrows a group on the backing
    // directory would not deny them on the mount). The kernel then asks for an inode's
    // access ACL (getxattr) when a caller other than the owner needs the group class, and
    // caches it with the attributes; it drops both after each ACL write of its own.
    want |= capable & cfuse_cap_posix_acl()
    // File handles (name_to_handle_at, NFS exports) outlive the kernel's inode: it looks a
    // forgotten node up again as "." in it, and a directory's parent as "..".
    want |= capable & cfuse_cap_export_support()
    // Read replies move file pages into the device by splice instead of copying; not into
    // io_uring's buffers, which take every reply by copy.
    if cfuse_device_uring_planned() {
      want &= ~(cfuse_cap_splice_write() | cfuse_cap_splice_move())
    } else {
      want |= capable & (cfuse_cap_splice_write() | cfuse_cap_splice_move())
    }
    conn.pointee.want = want
    WriteCacheState.negotiated.store(want & cfuse_cap_writeback_cache() != 0, ordering: .releasing)
    conn.pointee.max_write = maxWrite
    conn.pointee.max_read = maxRead
    conn.pointee.max_readahead = min(maxReadahead, conn.pointee.max_readahead)
    // Background requests in flight at once: readahead, and asynchronous direct I/O,
    // whose writes may wait for stale pages to be dropped (StalePageDrops) while readahead
    // of those pages waits for room; 64 let a 128-deep direct-write loop beside buffered
    // readers fill it, stalling a second at a time. Readahead still counts as congested
    // from `congestion_threshold` on, as before. (An ordinary user's daemon gets at most
    // the kernel's max_user_bgreq, thousands on most machines.)
    conn.pointee.max_background = 1024
    conn.pointee.congestion_threshold = 48
  }
}
