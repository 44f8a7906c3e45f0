import CFuseDevice
import FilesystemInterface

/// Requests are read by one worker thread at a time, which serves the quick ones itself
/// (CFuseDevice's reader.c) and polls for the next request before it sleeps, while requests
/// come back to back (busy_poll.c).
public enum RequestReading {
  /// Lets another worker read requests while this handler waits or works for long: a wait
  /// for something a later request brings (a forget) would otherwise never end.
  public static func handOff() { cfuse_device_hand_off() }

  /// The busy-poll window in microseconds (0: off), the requests found by polling, and
  /// those waited for in read().
  public static var busyPoll: (microseconds: UInt32, polled: UInt64, waited: UInt64) {
    let stats = cfuse_device_busy_poll_stats()
    return (stats.microseconds, stats.polled, stats.waited)
  }
}

/// The FUSE session's services to the filesystem: passthrough registrations on
/// `/dev/fuse` and the device reader's hand-off and busy-poll counters.
public struct FuseDriver: FilesystemDriver {
  /// The driver of the process's one FUSE session.
  public init() {}

  public var passthrough: any PassthroughFiles { FusePassthroughFiles() }

  public func handOff() { RequestReading.handOff() }

  public var busyPoll: (microseconds: UInt32, polled: UInt64, waited: UInt64) { RequestReading.busyPoll }

  public var requestCounts: [(operation: String, count: UInt64)] {
    (0..<UInt32(CFUSE_DEVICE_OPCODES)).compactMap { opcode in
      let count = cfuse_device_request_count(opcode)
      guard count > 0, let name = cfuse_device_opcode_name(opcode) else { return nil }
      return (String(cString: name), count)
    }
  }

  public var transport: TransportStatus {
    var info = cfuse_device_transport_info()
    cfuse_device_transport(&info)
    let reason = Self.text(info.reason)
    let inUse: RequestTransport = info.transport == CFUSE_TRANSPORT_IO_URING ? .ioUring : .devFuse
    var status = TransportStatus(
      inUse: inUse, requested: info.requested ? .ioUring : .devFuse,
      queues: inUse == .ioUring ? Int(info.queues) : 0,
      workersPerQueue: inUse == .ioUring ? Int(info.workers_per_queue) : 0,
      bufferBytes: inUse == .ioUring ? Int(info.payload) : 0,
      fallbackReason: reason.isEmpty ? nil : reason)
    if inUse == .ioUring {
      let handoff = cfuse_device_cpu_handoff_stats()
      let off = Self.text(handoff.reason)
      status.cpuHandoff = CPUHandoff(
        active: handoff.usable, handoffs: handoff.handoffs, stalls: handoff.stalls, offReason: off.isEmpty ? nil : off)
    }
    return status
  }

  /// The text in a C `char[N]` field (imported as a tuple), up to its first NUL.
  private static func text<Field>(_ field: Field) -> String {
    withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
  }

  public var writeCache: WriteCache? { WriteCacheState.current }

  public var stalePageDrops: (dropped: UInt64, lapsed: UInt64) {
    (StalePageDrops.dropped.load(ordering: .relaxed), StalePageDrops.lapsed.load(ordering: .relaxed))
  }
}
