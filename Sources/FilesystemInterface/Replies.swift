#if canImport(Glibc)
  import Glibc
#endif

/// The reply to lookup-like requests.
public struct Entry {
  /// The node id the kernel will use for this entry (0 for a cached negative entry).
  public var node: NodeID
  /// Attributes; `st_ino` is what programs see.
  public var attributes: stat
  /// How long the kernel may cache the name.
  public var entryTimeout: Double
  /// How long the kernel may cache the attributes.
  public var attributeTimeout: Double
  /// The node's generation: file handles carry it with the node id, and the kernel
  /// refuses (ESTALE) a handle whose generation is not the node's. Every entry of one
  /// node must carry the same; the root's is 0.
  public var generation: UInt64

  /// Creates an entry reply.
  public init(node: NodeID, attributes: stat, entryTimeout: Double, attributeTimeout: Double, generation: UInt64 = 0) {
    self.node = node
    self.attributes = attributes
    self.entryTimeout = entryTimeout
    self.attributeTimeout = attributeTimeout
    self.generation = generation
  }
}

/// A backing file registered with the kernel for passthrough (``PassthroughFiles``): an
/// open file whose reply carries it has its reads and writes served by the kernel.
public struct BackingID: Hashable, Sendable {
  /// The kernel's id for the registration.
  public let rawValue: Int32
  /// Wraps a registration id.
  public init(rawValue: Int32) { self.rawValue = rawValue }
}

/// The reply to open-like requests.
public struct OpenedFile {
  /// The handle the kernel passes back on every request on this open file.
  public var handle: FileHandle
  /// Keep the kernel's page cache from an earlier open (the file did not change).
  public var keepCache: Bool = false
  /// Bypass the page cache for this open file.
  public var directIO: Bool = false
  /// Let the kernel cache directory listings of this handle.
  public var cacheDirectory: Bool = false
  /// The kernel need not send `flush` on each close of this file (`FOPEN_NOFLUSH`).
  public var noFlush: Bool = false
  /// The kernel serves reads and writes from this backing file (`FOPEN_PASSTHROUGH`; the
  /// cache flags do not apply).
  public var backing: BackingID?

  /// Creates an open reply.
  public init(
    handle: FileHandle, keepCache: Bool = false, directIO: Bool = false, cacheDirectory: Bool = false,
    noFlush: Bool = false,
    backing: BackingID? = nil
  ) {
    self.handle = handle
    self.backing = backing
    self.keepCache = keepCache
    self.directIO = directIO
    self.cacheDirectory = cacheDirectory
    self.noFlush = noFlush
  }
}

/// The reply to a write.
public struct Written: Equatable, Sendable {
  /// Bytes written.
  public var count: Int
  /// Bytes of the file whose pages the kernel may have cached from before this write: a
  /// direct write that buffered readers of the file raced. The driver drops them from the
  /// kernel's cache before it replies (and never on the request's own thread, since the
  /// kernel then waits for the reads in flight on those pages). Nil: nothing to drop.
  public var stalePages: Range<Int64>?

  /// A reply of `count` bytes; `stalePages` to drop first.
  public init(count: Int, stalePages: Range<Int64>? = nil) {
    self.count = count
    self.stalePages = stalePages
  }
}

/// What a read replies with.
public enum ReadData {
  /// `count` bytes of `fd` from `offset` (the FUSE bridge may splice them).
  case file(fd: Int32, offset: off_t, count: Int)
}
