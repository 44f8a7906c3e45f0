import AppBoxEvents
import Posix
import SandboxPolicy

// MARK: - Changing the capacity of a live mount

extension SandboxFilesystem {
  /// What a change of capacity did.
  public struct Resize: Sendable {
    /// The capacity before, in bytes.
    public var from: Int64
    /// The capacity now, in bytes.
    public var to: Int64
    /// Files purged because the usage was above the new capacity.
    public var files: Int
    /// The bytes they gave back.
    public var bytes: Int64
    /// The usage afterwards (above `to` when what is left cannot be purged).
    public var used: Int64
  }

  /// Sets the capacity (the control channel's `resize`; never on a request thread) and
  /// logs a ``CapacityEvent``. A capacity below the usage purges at once, tmp then Caches
  /// in the usual order (never open files), down to what fits (reason `shrink`); what
  /// cannot be purged stays, and later allocations get ENOSPC until the usage is below
  /// the capacity again. A larger capacity frees room at once.
  /// - Parameters:
  ///   - capacity: The new capacity in bytes (checked by the caller: at least the
  ///     minimum `--capacity`).
  ///   - reason: Who asked.
  public func resize(to capacity: Int64, reason: CapacityChangeReason) -> Resize {
    let from = storage.books.withLock { books in
      defer { books.ledger.capacity = capacity }
      return books.ledger.capacity
    }
    events.record(.capacity(CapacityEvent(time: Clock.unix(), from: from, to: capacity, reason: reason)))
    let plan = storage.plan(reason: .shrink) { catalog, ledger in
      let over = ledger.used - ledger.capacity
      return over > 0 ? catalog.chooseVictims(toFree: over) : []
    }
    let purged = plan.victims.isEmpty ? [] : carryOut(plan, onRequestThread: false)
    recordUsage(.capacity)
    events.flush()  // when `appbox resize` returns, its events are in the log
    let used = storage.books.withLock { $0.ledger.used }
    return Resize(
      from: from, to: capacity, files: purged.count, bytes: purged.reduce(0) { $0 + $1.bytes }, used: used)
  }
}
