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
  /// io_uring: whether workers commit replies as SCHED_IDLE threads (CPU handoff), how
  /// many they committed so, how often a slow way back paused it, and why it is off.
  public var cpuHandoff = CPUHandoff()

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

/// CPU handoff's state: a ring worker sends its reply as a SCHED_IDLE thread, so that the
/// scheduler lets the woken program run on its CPU rather than move it to an idle one.
public struct CPUHandoff: Sendable, Equatable {
  /// Workers hand off (io_uring in use, allowed on this host, not turned off).
  public var active = false
  /// Replies committed as SCHED_IDLE.
  public var handoffs: UInt64 = 0
  /// Of these, ways back to SCHED_OTHER so slow that the worker paused handing off.
  public var stalls: UInt64 = 0
  /// Why it is not active (nil when it is, or with /dev/fuse).
  public var offReason: String?

  /// A state.
  public init(active: Bool = false, handoffs: UInt64 = 0, stalls: UInt64 = 0, offReason: String? = nil) {
    self.active = active
    self.handoffs = handoffs
    self.stalls = stalls
    self.offReason = offReason
  }
}
