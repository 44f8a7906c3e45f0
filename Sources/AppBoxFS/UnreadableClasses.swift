import Synchronization

/// The files whose stored class could not be used (it names no class, or cannot be read)
/// and which were reported, so that each is reported once: an event per file, not per
/// lookup. Bounded: past ``limit`` files the memory starts over, so a file may then be
/// reported again, never not at all.
final class UnreadableClasses: Sendable {
  /// How many files are remembered at most (16 bytes each).
  static let limit = 4096

  private let state = Mutex<(reported: Set<BackingKey>, total: Int)>(([], 0))

  /// Whether `key` is reported now for the first time: then the caller logs it.
  func isFirstReport(_ key: BackingKey) -> Bool {
    state.withLock { state in
      if state.reported.contains(key) { return false }
      if state.reported.count >= Self.limit { state.reported.removeAll(keepingCapacity: true) }
      state.reported.insert(key)
      state.total += 1
      return true
    }
  }

  /// Forgets `key` once its class was set again: a new problem is reported afresh.
  func repaired(_ key: BackingKey) {
    state.withLock { _ = $0.reported.remove(key) }
  }

  /// Files reported since the mount.
  var total: Int { state.withLock { $0.total } }
}
