import AppBoxEvents
import Dispatch
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
///
/// Lines are decoded with the log's one schema (``AppBoxEvent``). When the daemon rotates
/// the log, the old segment's last line is a ``LogRotation`` mark: the follower then opens
/// the path again and reads the new segment from its start.
final class EventLogFollower: @unchecked Sendable {
  // @unchecked: `pending` and the descriptors in `files` are touched only on `queue` (the
  // read source's handlers) after init; the source is cancelled once.
  private let path: String
  /// Who must own the log's segments (the mount's owner).
  private let owner: uid_t
  private let files: Files
  private let source: DispatchSourceRead
  private var pending: [UInt8] = []
  private let handle: @Sendable (DeviceStateChange) -> Void

  /// The descriptors, shared with the source's cancel handler (which closes them).
  private final class Files: @unchecked Sendable {
    // @unchecked: used on the follower's queue only (see above).
    var file: Int32
    let notify: Int32
    init(file: Int32, notify: Int32) {
      self.file = file
      self.notify = notify
    }
  }

  /// Why the log cannot be followed.
  enum Refusal: Error, Equatable {
    /// The log cannot be opened or watched (no inotify instance or watch left, gone).
    case unavailable(Errno)
    /// Its header names a format version newer than this AppBoxKit reads.
    case newerVersion(Int)
  }

  /// Starts following the log at `path`, whose segments must be regular files of `owner`
  /// (the mount's owner, whose daemon writes them).
  /// - Throws: ``Refusal``: the caller falls back to polling.
  init(
    path: String, owner: uid_t, queue: DispatchQueue, handle: @escaping @Sendable (DeviceStateChange) -> Void
  ) throws(Refusal) {
    let notify: Int32
    do { notify = try Inotify.open() } catch { throw .unavailable(error) }
    let file: Int32
    do { file = try Self.open(path, owner: owner, notify: notify) } catch {
      Sys.close(notify)
      throw .unavailable(error)
    }
    do throws(Refusal) {
      if let version = Self.headerVersion(file), version > EventLogFormat.version { throw .newerVersion(version) }
      do { _ = try Sys.lseek(file, 0, SEEK_END) } catch { throw .unavailable(error) }
    } catch {
      Sys.close(file)
      Sys.close(notify)
      throw error
    }
    self.path = path
    self.owner = owner
    self.handle = handle
    let files = Files(file: file, notify: notify)
    self.files = files
    source = DispatchSource.makeReadSource(fileDescriptor: notify, queue: queue)
    source.setEventHandler { [weak self] in self?.readAppended() }
    source.setCancelHandler {
      Sys.close(files.file)
      Sys.close(files.notify)
    }
    source.resume()
  }

  deinit { source.cancel() }

  /// Stops following; the descriptors are closed once the queue is done with them.
  func cancel() { source.cancel() }

  /// Opens the log at `path` for reading and watches it for appends. It is opened without
  /// following a final symlink and without blocking (`O_NONBLOCK`, which a regular file
  /// ignores: a FIFO put in its place holds nothing up), and refused (EPERM) unless it is
  /// a regular file of `owner`.
  private static func open(_ path: String, owner: uid_t, notify: Int32) throws(Errno) -> Int32 {
    try Inotify.watchWrites(notify, path: path)
    let file = try Sys.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
    do throws(Errno) {
      let st = try Sys.fstat(file)
      guard st.st_mode & S_IFMT == S_IFREG, st.st_uid == owner else { throw Errno.notPermitted }
    } catch {
      Sys.close(file)
      throw error
    }
    return file
  }

  /// The header of the segment open at `file` (its first line), if it has one (a log
  /// from before headers has none: version 1).
  private static func header(_ file: Int32) -> LogHeader? {
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count: Int
    do { count = try buffer.withUnsafeMutableBytes { (raw) throws(Errno) -> Int in try Sys.pread(file, raw, 0) } } catch
    {
      return nil  // unreadable here: the reads that follow say so
    }
    guard let end = buffer[..<count].firstIndex(of: 0x0A) else { return nil }
    do throws(EventLineError) {
      guard case .log(let header) = try AppBoxEvent.decode(buffer[..<end]) else { return nil }
      return header
    } catch {
      return nil  // not a header: a log older than headers
    }
  }

  /// The version the log's header names, if it has one.
  private static func headerVersion(_ file: Int32) -> Int? { header(file)?.version }

  /// After a rotation mark naming `segment`: that segment, from its start. It is at the
  /// path, or already the previous segment when the log rotated again meanwhile; when it
  /// is gone too (the follower fell two segments behind), the current one.
  private func openSegment(_ segment: Int) throws(Errno) -> Int32 {
    for candidate in [path, EventLogFormat.previousSegmentPath(of: path)] {
      let file: Int32
      // A candidate that fails: no previous segment, or not the owner's regular file.
      do { file = try Self.open(candidate, owner: owner, notify: files.notify) } catch { continue }
      if Self.header(file)?.segment == segment { return file }
      Sys.close(file)
    }
    return try Self.open(path, owner: owner, notify: files.notify)
  }

  /// Reads what was appended since the last read and hands on its state changes; after a
  /// rotation mark, goes on with the new segment.
  private func readAppended() {
    Inotify.drain(files.notify)
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
      let file = files.file
      while true {
        let count: Int
        do {
          count = try buffer.withUnsafeMutableBytes { (raw) throws(Errno) -> Int in try Sys.read(file, raw) }
        } catch {
          return  // the next append wakes it again
        }
        if count == 0 { break }
        pending += buffer[..<count]
      }
      // The daemon writes whole lines: only the last may be unfinished.
      guard let end = pending.lastIndex(of: 0x0A) else { return }
      let complete = Array(pending[...end])
      pending.removeSubrange(...end)
      var rotated: Int?
      for line in complete.split(separator: 0x0A) {
        switch AppBoxEvent.leadingType(line) {
        case "state"?, nil:
          // A line the daemon did not write type-first is decoded whole (it may be a state).
          let event: AppBoxEvent
          do { event = try AppBoxEvent.decode(line) } catch { continue }  // malformed or unknown: no state change
          if case .state(let state) = event { handle(state.change) }
        case "rotate"?:
          let event: AppBoxEvent
          do { event = try AppBoxEvent.decode(line) } catch { continue }  // not a mark after all
          if case .rotate(let mark) = event { rotated = mark.nextSegment }
        default:
          continue
        }
      }
      guard let segment = rotated else { return }
      // The new segment is already at the path when the mark is written.
      let next: Int32
      do { next = try openSegment(segment) } catch { return }  // the next append wakes it to try again
      Sys.close(file)
      files.file = next
      pending.removeAll()
    }
  }
}
