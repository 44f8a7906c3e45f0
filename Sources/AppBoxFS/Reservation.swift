import SandboxPolicy

/// Bytes taken from the quota for one change, before the change is made.
///
/// Noncopyable, so it is used up exactly once: ``SandboxFilesystem/settle(_:_:fd:lookedUp:)``
/// measures the change and settles the difference, ``cancel()`` gives the bytes back. A
/// reservation dropped on an error path gives its bytes back by itself (its `deinit`), so
/// no path undoes a reservation by hand, and none can be settled twice.
struct Reservation: ~Copyable {
  /// The bytes taken (0 for none).
  let bytes: Int64
  /// The container and domain they were charged to.
  let area: StorageArea
  /// The books they came from; unmanaged so that `discard self` may end the value
  /// (the filesystem keeps the books alive for as long as it serves requests).
  private let storage: Unmanaged<StorageState>

  /// Wraps bytes already charged to `area` in `storage`.
  init(bytes: Int64, area: StorageArea, storage: StorageState) {
    self.bytes = bytes
    self.area = area
    self.storage = Unmanaged.passUnretained(storage)
  }

  /// Gives the bytes back.
  consuming func cancel() {
    let (bytes, area, storage) = (self.bytes, self.area, self.storage)
    discard self
    if bytes != 0 { storage.takeUnretainedValue().charge(-bytes, area: area) }
  }

  /// Ends the reservation, handing its bytes to a measurement that settles them.
  consuming func handOver() -> (bytes: Int64, area: StorageArea) {
    let taken = (bytes, area)
    discard self
    return taken
  }

  deinit {
    if bytes != 0 { storage.takeUnretainedValue().charge(-bytes, area: area) }
  }
}
