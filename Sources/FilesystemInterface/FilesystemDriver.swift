/// What the driver that serves a filesystem offers it beyond requests and replies: the
/// FUSE bridge's session (`FuseDriver`), or an in-memory driver in tests.
public protocol FilesystemDriver: Sendable {
  /// Passthrough registrations (never available outside a FUSE session).
  var passthrough: any PassthroughFiles { get }

  /// Lets another worker read requests while this handler waits or works for long: a wait
  /// for something a later request brings (a forget) would otherwise never end.
  func handOff()

  /// The busy-poll window in microseconds (0: off), the requests found by polling, and
  /// those waited for.
  var busyPoll: (microseconds: UInt32, polled: UInt64, waited: UInt64) { get }

  /// Requests taken from the kernel so far, by operation (the FUSE opcode's name in lower
  /// case, e.g. `lookup`), those seen at least once, in opcode order.
  var requestCounts: [(operation: String, count: UInt64)] { get }

  /// How requests reach the daemon.
  var transport: TransportStatus { get }

  /// Direct writes whose replies waited for their stale pages to leave the kernel's cache
  /// (``Written/stalePages``), and those replied to before it could be done (the kernel
  /// kept the invalidation waiting too long).
  var stalePageDrops: (dropped: UInt64, lapsed: UInt64) { get }

  /// The kernel's writeback cache, once the kernel agreed to it (nil: every write comes
  /// to the filesystem as the program makes it).
  var writeCache: WriteCache? { get }
}

extension FilesystemDriver {
  /// None: a driver without a kernel caches no writes.
  public var writeCache: WriteCache? { nil }

  /// None: a driver without a kernel has no page cache.
  public var stalePageDrops: (dropped: UInt64, lapsed: UInt64) { (0, 0) }
}

/// Registers backing files for passthrough opens: an open whose reply carries one is
/// served by the kernel from the backing file. Thread-safe.
public protocol PassthroughFiles: Sendable {
  /// True once the kernel agreed to passthrough (always false before the mount is up).
  var isAvailable: Bool { get }

  /// Registers `fd` (an open backing file; the kernel takes its own reference).
  /// - Returns: nil when the kernel refuses (then ``isAvailable`` turns false).
  func register(_ fd: Int32) -> BackingID?

  /// Drops the registration (open files that use it keep it until they are released).
  func unregister(_ id: BackingID)
}

/// How long the kernel may cache what the filesystem replies.
public struct CacheTimeouts: Sendable {
  /// Seconds the kernel may cache attributes (all changes go through the mount).
  public var attributeTimeout: Double = 60
  /// Seconds the kernel may cache names, negative ones included.
  public var entryTimeout: Double = 60

  /// The defaults.
  public init() {}

  /// Seconds the kernel may cache `attributes`: ``attributeTimeout``, but none for a
  /// regular file with a set-user-ID or set-group-ID bit. The daemon clears those bits
  /// itself on a write, fallocate or copy (FUSE_HANDLE_KILLPRIV_V2), and after those the
  /// kernel re-reads a file's size and times but not its mode; so `stat` and the
  /// permission check of an `exec` ask the daemon again. Such files are rare.
  @inline(__always)
  public func attributeTimeout(for attributes: stat) -> Double {
    let mode = attributes.st_mode
    return mode & S_IFMT == S_IFREG && mode & (S_ISUID | S_ISGID) != 0 ? 0 : attributeTimeout
  }
}

#if canImport(Glibc)
  import Glibc
#endif
