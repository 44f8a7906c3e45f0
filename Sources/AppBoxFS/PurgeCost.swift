import AppBoxEvents
import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization

/// What purges cost the app: the names purged recently (``PurgedNames``), re-creations
/// and missed lookups of them, and the Caches files' hits.
///
/// Hot-path cost: nothing unless a lookup misses, or a file is created, in Caches or tmp;
/// then an atomic load, and only while names are remembered, a lock and one hash lookup.
/// Opens and daemon-served reads of Caches files count one relaxed atomic add each.
final class PurgeCost: Sendable {
  /// Lock order: a leaf lock; never held across a syscall.
  private let state = Mutex(State())
  /// How many names are remembered (read without the lock, to skip it when 0).
  private let remembered = Atomic<Int>(0)
  /// Read-only opens of existing regular files in Caches (every open reaches the daemon).
  let cacheOpens = Atomic<Int>(0)
  /// Read requests on Caches files that reach the daemon (passthrough reads do not).
  let cacheReads = Atomic<Int>(0)

  private struct State: ~Copyable {
    var names = PurgedNames()
    var counters = PurgeCostCounters()
  }

  /// Remembers purged names.
  func purged(_ names: [(key: PurgedNames.Key, bytes: Int64)], time: Double) {
    let count = state.withLock { state in
      for name in names { state.names.remember(name.key, bytes: name.bytes, time: time) }
      return state.names.count
    }
    remembered.store(count, ordering: .relaxed)
  }

  /// Whether `key` may be remembered; false means certainly not (no lock taken).
  @inline(__always)
  var isEmpty: Bool { remembered.load(ordering: .relaxed) == 0 }

  /// Notes that the app looked up or created `key`.
  /// - Returns: the purge it pays for (counted), or nil.
  func note(_ kind: PurgeCostKind, _ key: PurgedNames.Key) -> PurgedNames.Record? {
    guard !isEmpty else { return nil }
    let (record, count) = state.withLock { state in
      let record = kind == .recreated ? state.names.recreate(key) : state.names.miss(key)
      if let record { state.counters.count(kind, purgedBytes: record.bytes) }
      return (record, state.names.count)
    }
    remembered.store(count, ordering: .relaxed)
    return record
  }

  /// Bytes written again into re-created names: what each held at its first last close
  /// (or when renamed into place).
  let bytesWrittenAgain = Atomic<Int64>(0)

  /// The counters, for `appbox status`: a JSON object.
  var jsonObject: String {
    let (counters, count) = state.withLock { ($0.counters, $0.names.count) }
    return "{\"recreated\":\(counters.recreated),\"recreatedBytes\":\(counters.recreatedBytes)"
      + ",\"bytesWrittenAgain\":\(bytesWrittenAgain.load(ordering: .relaxed)),\"missed\":\(counters.missed),\"remembered\":\(count),\"rememberedLimit\":\(PurgedNames.defaultLimit)"
      + ",\"cacheOpens\":\(cacheOpens.load(ordering: .relaxed)),\"cacheReads\":\(cacheReads.load(ordering: .relaxed))}"
  }
}

extension SandboxFilesystem {
  /// Records the app paying for a purge of `name` in `directory` (Caches or tmp), if it
  /// was purged recently: an event and a counter.
  /// - Returns: whether it was a purged name.
  @discardableResult
  func notePurgeCost(_ kind: PurgeCostKind, _ name: FileName, in directory: Inode) -> Bool {
    guard !purgeCost.isEmpty else { return false }
    let key = PurgedNames.Key(directory: directory.key.inode, name: name.bytes)
    guard let record = purgeCost.note(kind, key) else { return false }
    let now = Clock.unix()
    events.record(
      .purgeCost(
        PurgeCostEvent(
          kind: kind, time: now, path: mountPath(of: name, in: directory), purgedBytes: record.bytes,
          secondsSincePurge: max(0, now - record.time))))
    return true
  }

  /// The last release of a file that re-created a purged name: what it holds now was
  /// written again.
  func countWrittenAgain(_ inode: Inode) {
    guard inode.recreatesPurged.exchange(false, ordering: .relaxed) else { return }
    purgeCost.bytesWrittenAgain.add(inode.allocated.withLock { $0 }, ordering: .relaxed)
  }
}
