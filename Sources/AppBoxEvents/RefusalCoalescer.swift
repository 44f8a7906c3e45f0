import SandboxPolicy

/// Coalesces repeated Data Protection refusals so that no client can grow the event log
/// by repeating one refused operation (docs/reference.md, "Events").
///
/// The first refusal of a path, class, operation and state is written at once and opens
/// a window of ``window`` seconds for that key. Refusals of the same key inside the window
/// are only counted; when the window closes (``expire(now:)``, ``drain()``) one event
/// stands for them: its `count`, its `time` (the first of them) and `last`. A storm of one
/// key therefore costs at most two lines per window; its counts add up exactly. At most
/// ``capacity`` windows are open: a refusal of yet another key beyond that is written at
/// once, uncoalesced (the log's size bound still holds).
///
/// A value type: the event log keeps one behind its lock. `now` is a monotonic clock's
/// seconds; the events' own times are wall-clock.
public struct RefusalCoalescer: Sendable {
  /// What makes two refusals the same.
  struct Key: Hashable, Sendable {
    var pathBytes: [UInt8]
    var protectionClass: ProtectionClass
    var operation: ProtectedOperation
    var state: DeviceState
  }

  private struct Window: Sendable {
    var closes: Double
    var sequence: UInt64
    /// The refusals absorbed so far (their count, first and last time); nil: none yet.
    var absorbed: ProtectionEvent?
  }

  /// How long a window stays open, in seconds.
  public let window: Double
  /// How many windows may be open at once.
  public let capacity: Int
  private var open: [Key: Window] = [:]
  /// Windows in the order they close (all last ``window``): keys with their sequence.
  private var closing: [(key: Key, sequence: UInt64)] = []
  private var head = 0
  private var nextSequence: UInt64 = 0
  /// Refusals absorbed into coalesced events so far.
  public private(set) var absorbed = 0

  /// Creates a coalescer.
  /// - Parameters:
  ///   - window: How long a window stays open, in seconds.
  ///   - capacity: How many windows may be open at once.
  public init(window: Double, capacity: Int) {
    self.window = window
    self.capacity = capacity
  }

  /// Notes a refusal.
  /// - Returns: the events to write now, in order: the coalesced event of the key's
  ///   window if it has just closed, then `event` if it opens a window (or cannot); empty
  ///   when it was absorbed.
  public mutating func note(_ event: ProtectionEvent, now: Double) -> [ProtectionEvent] {
    let key = Key(
      pathBytes: event.pathBytes, protectionClass: event.protectionClass, operation: event.operation,
      state: event.state)
    var out: [ProtectionEvent] = []
    if var current = open[key] {
      if now < current.closes {
        if var absorbed = current.absorbed {
          absorbed.count += event.count
          absorbed.last = max(absorbed.last ?? absorbed.time, event.last ?? event.time)
          current.absorbed = absorbed
        } else {
          var first = event
          first.last = event.last ?? event.time
          current.absorbed = first
        }
        absorbed += event.count
        open[key] = current
        return []
      }
      open[key] = nil
      if let absorbed = current.absorbed { out.append(absorbed) }
    }
    guard window > 0, open.count < capacity else { return out + [event] }
    nextSequence += 1
    open[key] = Window(closes: now + window, sequence: nextSequence, absorbed: nil)
    closing.append((key, nextSequence))
    return out + [event]
  }

  /// Closes the windows that have closed by `now`.
  /// - Returns: the coalesced events of those that absorbed refusals, in the order they
  ///   opened.
  public mutating func expire(now: Double) -> [ProtectionEvent] {
    var out: [ProtectionEvent] = []
    while head < closing.count {
      let (key, sequence) = closing[head]
      if let current = open[key], current.sequence == sequence {
        guard current.closes <= now else { break }
        open[key] = nil
        if let absorbed = current.absorbed { out.append(absorbed) }
      }
      head += 1
    }
    compact()
    return out
  }

  /// Closes every window.
  /// - Returns: the coalesced events of those that absorbed refusals, in the order they
  ///   opened.
  public mutating func drain() -> [ProtectionEvent] {
    expire(now: .infinity)
  }

  /// When the next window closes (monotonic seconds), if any is open.
  public var nextClosing: Double? {
    var index = head
    while index < closing.count {
      if let current = open[closing[index].key], current.sequence == closing[index].sequence {
        return current.closes
      }
      index += 1
    }
    return nil
  }

  /// How many windows are open.
  public var openWindows: Int { open.count }

  private mutating func compact() {
    if head == closing.count {
      closing.removeAll(keepingCapacity: true)
      head = 0
    } else if head > 1024 && head * 2 > closing.count {
      closing.removeFirst(head)
      head = 0
    }
  }
}
