import Synchronization

/// Backing files that a program may write through a shared mapping of the backing file
/// itself, without a request to the daemon: those a read-write handle opened while
/// passthrough handles were open (it joins them, and the kernel maps the backing file
/// for it). Such a mapping outlives the handle: the kernel makes the backing file the
/// mapping's file, so the handle is released at its close while the mapping stays. The
/// mapping cannot extend the file, only fill its holes, so a file listed here is kept
/// without holes below its end (``SandboxFilesystem/changingExtent(_:_:)``): for as long
/// as the daemon runs, or until its last name is removed through the mount with no
/// handle open (then no one can reach it through the mount again). See
/// docs/architecture.md, "Passthrough and the quota".
final class WriteMappedFiles: Sendable {
  /// Taken last: under an inode's `ioMode` lock, and nothing is taken under it.
  private let keys = Mutex<Set<BackingKey>>([])

  /// Lists `key`.
  func add(_ key: BackingKey) { _ = keys.withLock { $0.insert(key) } }

  /// Whether `key` is listed.
  func contains(_ key: BackingKey) -> Bool { keys.withLock { $0.contains(key) } }

  /// Takes `key` off the list.
  func remove(_ key: BackingKey) { _ = keys.withLock { $0.remove(key) } }

  /// How many files are listed.
  var count: Int { keys.withLock { $0.count } }
}
