import Dispatch
import Foundation
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

/// Follows an AppBox mount's event log (JSON Lines, appended by the daemon, in the owner's
/// runtime directory) from its current end, and hands each device-state change to a
/// handler on a serial queue, in the log's order. inotify wakes it on each append: no
/// polling, and nothing asked of the daemon (a control-channel subscription would hold
/// one of its few connection threads per program).
final class EventLogFollower: @unchecked Sendable {
  // @unchecked: `pending` is touched only on `queue` (the read source's handler), the
  // descriptors are fixed at init and closed once, by the source's cancel handler.
  private let file: Int32
  private let notify: Int32
  private let source: DispatchSourceRead
  private var pending: [UInt8] = []
  private let handle: @Sendable (DeviceStateChange) -> Void

  /// Starts following the log at `path`.
  /// - Throws: when the log cannot be opened or watched (no inotify instance or watch
  ///   left): the caller falls back to polling.
  init(path: String, queue: DispatchQueue, handle: @escaping @Sendable (DeviceStateChange) -> Void) throws(Errno) {
    let notify = try Inotify.open()
    var file: Int32 = -1
    do throws(Errno) {
      try Inotify.watchWrites(notify, path: path)
      file = try Sys.open(path, O_RDONLY | O_NOFOLLOW)
      guard try Sys.fstat(file).st_mode & S_IFMT == S_IFREG else { throw Errno.invalidArgument }
      _ = try Sys.lseek(file, 0, SEEK_END)
    } catch {
      if file >= 0 { Sys.close(file) }
      Sys.close(notify)
      throw error
    }
    self.file = file
    self.notify = notify
    self.handle = handle
    source = DispatchSource.makeReadSource(fileDescriptor: notify, queue: queue)
    source.setEventHandler { [weak self] in self?.readAppended() }
    source.setCancelHandler { [file, notify] in
      Sys.close(file)
      Sys.close(notify)
    }
    source.resume()
  }

  deinit { source.cancel() }

  /// Stops following; the descriptors are closed once the queue is done with them.
  func cancel() { source.cancel() }

  /// Reads what was appended since the last read and hands on its state changes.
  private func readAppended() {
    Inotify.drain(notify)
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while let count = try? buffer.withUnsafeMutableBytes({ (raw) throws(Errno) -> Int in try Sys.read(file, raw) }),
      count > 0
    {
      pending += buffer[..<count]
    }
    // The daemon writes each line with one write(2): only the last may be unfinished.
    guard let end = pending.lastIndex(of: 0x0A) else { return }
    let complete = pending[...end]
    pending.removeSubrange(...end)
    for line in complete.split(separator: 0x0A) {
      if let change = Self.stateChange(line) { handle(change) }
    }
  }

  /// The change a `{"type":"state",…,"from":…,"to":…}` line records; nil for other lines.
  static func stateChange(_ line: ArraySlice<UInt8>) -> DeviceStateChange? {
    guard line.starts(with: Array(#"{"type":"state""#.utf8)),
      let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
      let from = (object["from"] as? String).flatMap(DeviceState.init(name:)),
      let to = (object["to"] as? String).flatMap(DeviceState.init(name:))
    else { return nil }
    return DeviceStateChange(from: from, to: to)
  }
}
