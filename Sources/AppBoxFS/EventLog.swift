import AppBoxEvents
import Dispatch
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A mount's event log (docs/reference.md, "Events"; docs/architecture.md, "The event
/// log"): typed events (``AppBoxEvent``) encoded as JSON Lines off the request path, on a
/// serial queue, each batch with one `write` so that a reader never sees half a line.
///
/// Bounded: repeated refusals are coalesced (``RefusalCoalescer``), and the log is
/// rotated when its current segment would pass ``EventLogLimits/segmentBytes``: the
/// segment becomes the previous one (`ID.1.jsonl`, replacing the one before, whose
/// events are dropped) and a new segment starts at the same path with a ``LogHeader`` that
/// counts the events before it. The old segment ends with a ``LogRotation`` line, which wakes
/// followers so they open the path again. A mount's log thus holds at most two segments.
/// What cannot be written (the log cannot be opened, a write fails, a rotation fails and
/// the segment reaches twice its size) is counted in ``status``, never silently lost.
final class EventLog: Sendable {
  /// The mount's id: the log's name and its headers' `mount`.
  let id: String
  let limits: EventLogLimits
  private let paths: Paths?
  private let queue = DispatchQueue(label: "appbox.events")
  /// The file and its counts (a leaf lock: taken on the queue, and by ``status``).
  private let writer: Mutex<Writer>
  /// Refusals being coalesced (a leaf lock taken on request threads; never held across a
  /// syscall).
  private let refusals: Mutex<Refusals>

  /// Where the segments live: the current one at `current`, the previous at `previous`.
  private struct Paths: Sendable {
    var current: String
    var previous: String
    /// The next segment, before it is renamed to `current`.
    var next: String
    /// The previous segment's new link, before it is renamed to `previous`.
    var previousNext: String

    init(_ path: String) {
      current = path
      previous = EventLogFormat.previousSegmentPath(of: path)
      next = path + ".next"
      previousNext = previous + ".next"
    }
  }

  private struct Writer: Sendable {
    var fd: Int32 = -1
    var segment = 0
    /// Bytes and events in the current segment (the header is bytes, not an event).
    var bytes = 0
    var events = 0
    /// The previous segment's (dropped at the next rotation).
    var previousEvents = 0
    var previousBytes = 0
    /// Events written before the current segment.
    var eventsBefore = 0
    /// Events that could not be written (no log file, a failed write, encoding, the hard
    /// cap after a failed rotation).
    var lostEvents = 0
    /// The last error met, for `appbox status`.
    var lastError: String?
  }

  private struct Refusals: Sendable {
    var coalescer: RefusalCoalescer
    /// Whether a timer will close the open windows.
    var timerArmed = false
  }

  /// What `appbox status` shows of the log.
  struct Status: Sendable {
    var id: String
    var segment: Int
    var bytes: Int
    var previousBytes: Int
    var droppedEvents: Int
    var lostEvents: Int
    var coalescedRefusals: Int
    var lastError: String?
  }

  /// Opens (creating, mode 0600, appending when it exists) the log at `path` and writes
  /// its header. Nil path: events are not recorded.
  /// - Parameters:
  ///   - path: The current segment's path (`…/ID.jsonl`).
  ///   - id: The mount's id; nil: one is made from the clock.
  ///   - limits: The log's bounds.
  init(path: String?, id: String?, limits: EventLogLimits) {
    self.id = id ?? MountLogID.make(time: Clock.unix())
    self.limits = limits
    paths = path.map(Paths.init)
    refusals = Mutex(
      Refusals(coalescer: RefusalCoalescer(window: limits.coalescingWindow, capacity: limits.coalescingKeys)))
    var writer = Writer()
    if let path {
      do throws(Errno) {
        writer.fd = try Sys.openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o600)
        writer.bytes = Int(try Sys.fstat(writer.fd).st_size)
      } catch {
        writer.lastError = "cannot open \(path): \(error)"
      }
    }
    self.writer = Mutex(writer)
    let header = AppBoxEvent.log(LogHeader(mount: self.id, time: Clock.unix()))
    queue.async { [self] in write([header]) }
  }

  deinit {
    let fd = writer.withLock { $0.fd }
    if fd >= 0 { Sys.close(fd) }
  }

  // MARK: Recording

  /// Records one event (any thread; it is encoded and written on the log's queue).
  func record(_ event: AppBoxEvent) {
    guard paths != nil else { return }
    queue.async { [self] in write([event]) }
  }

  /// Records events in order, with one write.
  func record(_ events: [AppBoxEvent]) {
    guard paths != nil, !events.isEmpty else { return }
    queue.async { [self] in write(events) }
  }

  /// Records a refusal, coalesced with the same refusals within the window (any thread:
  /// one lock and a hash lookup; a storm of one refusal enqueues nothing but the first).
  func refused(_ event: ProtectionEvent) {
    guard paths != nil else { return }
    let (now, arm) = refusals.withLock { state -> ([ProtectionEvent], Bool) in
      let now = state.coalescer.note(event, now: Clock.monotonic())
      let arm = !state.timerArmed && state.coalescer.openWindows > 0
      if arm { state.timerArmed = true }
      return (now, arm)
    }
    record(now.map(AppBoxEvent.refusal))
    if arm { closeWindows(after: limits.coalescingWindow) }
  }

  /// Waits until every recorded event is written, coalesced refusals included.
  func flush() {
    guard paths != nil else { return }
    queue.sync {
      let pending = refusals.withLock { $0.coalescer.drain() }
      write(pending.map(AppBoxEvent.refusal))
    }
  }

  /// What `appbox status` shows.
  var status: Status {
    let coalesced = refusals.withLock { $0.coalescer.absorbed }
    return writer.withLock { writer in
      Status(
        id: id, segment: writer.segment, bytes: writer.bytes, previousBytes: writer.previousBytes,
        droppedEvents: writer.eventsBefore - writer.previousEvents, lostEvents: writer.lostEvents,
        coalescedRefusals: coalesced,
        lastError: writer.lastError)
    }
  }

  /// Writes the coalesced refusals of the windows that closed, `delay` seconds from now,
  /// and arms itself again while windows are open.
  private func closeWindows(after delay: Double) {
    queue.asyncAfter(deadline: .now() + .nanoseconds(Int(max(delay, 0.001) * 1e9))) { [self] in
      let (closed, next) = refusals.withLock { state -> ([ProtectionEvent], Double?) in
        let now = Clock.monotonic()
        let closed = state.coalescer.expire(now: now)
        let next = state.coalescer.nextClosing.map { $0 - now }
        state.timerArmed = next != nil
        return (closed, next)
      }
      write(closed.map(AppBoxEvent.refusal))
      if let next { closeWindows(after: next) }
    }
  }

  // MARK: Writing (on the queue)

  /// Encodes and appends `events`, rotating between lines when the segment is full.
  private func write(_ events: [AppBoxEvent]) {
    guard let paths, !events.isEmpty else { return }
    var lines: [(line: [UInt8], event: AppBoxEvent)] = []
    lines.reserveCapacity(events.count)
    var unencodable = 0
    for event in events {
      do throws(EventEncodingError) {
        var line = try event.encoded()
        line.append(0x0A)
        lines.append((line, event))
      } catch {
        unencodable += 1
      }
    }
    writer.withLock { writer in
      writer.lostEvents += unencodable
      var pending: [UInt8] = []
      var pendingEvents = 0
      for (line, event) in lines {
        let full = writer.bytes + pending.count + line.count > limits.segmentBytes
        if full && writer.events + pendingEvents > 0 && !event.isLogStructure {
          append(&pending, events: &pendingEvents, to: &writer)
          rotate(&writer, paths)
        }
        // Past twice the segment (rotation failed): nothing more is written.
        if writer.fd < 0 || writer.bytes + pending.count + line.count > 2 * limits.segmentBytes {
          if !event.isLogStructure { writer.lostEvents += 1 }
          continue
        }
        pending += line
        if !event.isLogStructure { pendingEvents += 1 }
      }
      append(&pending, events: &pendingEvents, to: &writer)
    }
  }

  /// Writes what is pending to the current segment.
  private func append(_ pending: inout [UInt8], events: inout Int, to writer: inout Writer) {
    defer {
      pending.removeAll(keepingCapacity: true)
      events = 0
    }
    guard !pending.isEmpty, writer.fd >= 0 else { return }
    do throws(Errno) {
      try Sys.writeAll(writer.fd, pending)
      writer.bytes += pending.count
      writer.events += events
    } catch {
      writer.lostEvents += events
      writer.lastError = "cannot write the event log: \(error)"
    }
  }

  /// Starts a new segment at the current path; the current one becomes the previous
  /// (replacing the one before), ending with a rotation mark. On failure the current
  /// segment goes on (up to twice its size) and the error is kept for `appbox status`.
  private func rotate(_ writer: inout Writer, _ paths: Paths) {
    let now = Clock.unix()
    let eventsBefore = writer.eventsBefore + writer.events
    let header = AppBoxEvent.log(
      LogHeader(mount: id, time: now, segment: writer.segment + 1, eventsBefore: eventsBefore))
    let mark = AppBoxEvent.rotate(LogRotation(mount: id, time: now, nextSegment: writer.segment + 1))
    var next: Int32 = -1
    do throws(Errno) {
      var headerLine = try encoded(header)
      headerLine.append(0x0A)
      var markLine = try encoded(mark)
      markLine.append(0x0A)
      next = try Sys.openat(
        AT_FDCWD, paths.next, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o600)
      try Sys.writeAll(next, headerLine)
      // The current segment gets a second name, which then replaces the previous
      // segment; the new segment then replaces the current name: the path always names a
      // segment, and a reader that opens it after the mark finds the new one.
      Self.unlinkIfPresent(paths.previousNext)
      let fd = writer.fd
      try paths.previousNext.withCString { name in Result { () throws(Errno) in try Sys.link(fd, AT_FDCWD, name) } }
        .get()
      try Sys.rename(paths.previousNext, to: paths.previous)
      try Sys.rename(paths.next, to: paths.current)
      // The mark wakes followers (their inotify watch is on this file). The new segment is
      // in place either way; a follower that misses the mark finds it at its next open.
      var markBytes = markLine.count
      do throws(Errno) { try Sys.writeAll(writer.fd, markLine) } catch {
        markBytes = 0
        writer.lastError = "cannot end the rotated event log segment: \(error)"
      }
      Sys.close(writer.fd)
      writer.fd = next
      writer.segment += 1
      writer.eventsBefore = eventsBefore
      writer.previousEvents = writer.events
      writer.previousBytes = writer.bytes + markBytes
      writer.events = 0
      writer.bytes = headerLine.count
    } catch {
      if next >= 0 {
        Sys.close(next)
        Self.unlinkIfPresent(paths.next)
      }
      writer.lastError = "cannot rotate the event log: \(error)"
    }
  }

  private func encoded(_ event: AppBoxEvent) throws(Errno) -> [UInt8] {
    do throws(EventEncodingError) { return try event.encoded() } catch { throw .invalidArgument }
  }

  /// Removes a leftover file of an earlier, failed rotation.
  private static func unlinkIfPresent(_ path: String) {
    do throws(Errno) { try Sys.unlink(path) } catch {
      // Absent is what was wanted; anything else shows at the link that follows.
    }
  }
}
