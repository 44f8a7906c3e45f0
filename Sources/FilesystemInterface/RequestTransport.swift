/// How requests travel between the kernel and the daemon.
public enum RequestTransport: String, Sendable, CaseIterable {
  /// `read(2)` and `writev(2)` on `/dev/fuse`, every kernel.
  case devFuse = "dev-fuse"
  /// FUSE over io_uring (Linux 6.14+, with the fuse module's `enable_uring` on): per-CPU
  /// queues of buffers, one system call per request. Forgets, interrupts and
  /// notifications still pass through `/dev/fuse`.
  case ioUring = "io-uring"
}

/// The transport a session uses, and what it was asked for.
public struct TransportStatus: Sendable, Equatable {
  /// The transport requests come through now.
  public var inUse: RequestTransport
  /// The transport the mount asked for.
  public var requested: RequestTransport
  /// io_uring: the kernel's queues (one per possible CPU); 0 otherwise.
  public var queues: Int
  /// io_uring: worker threads per queue, each with one ring entry; 0 otherwise.
  public var workersPerQueue: Int
  /// io_uring: bytes of each entry's payload buffer (virtual; resident as requests fill it).
  public var bufferBytes: Int
  /// Why the transport asked for is not the one in use (nil when it is).
  public var fallbackReason: String?

  /// A status.
  public init(
    inUse: RequestTransport, requested: RequestTransport, queues: Int = 0, workersPerQueue: Int = 0,
    bufferBytes: Int = 0, fallbackReason: String? = nil
  ) {
    self.inUse = inUse
    self.requested = requested
    self.queues = queues
    self.workersPerQueue = workersPerQueue
    self.bufferBytes = bufferBytes
    self.fallbackReason = fallbackReason
  }
}
