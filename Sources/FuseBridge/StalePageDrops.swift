import CFuse
import Dispatch
import FilesystemInterface
import Posix
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Replies to writes whose stale pages (``Written/stalePages``) must leave the kernel's
/// page cache first, on a thread of their own.
///
/// The kernel drops a file's cached pages for a notification only once it holds each one's
/// lock, and a page being read is locked until its read request is answered. The thread
/// that sends the notification must therefore not be one that reads requests: with every
/// worker waiting so, the read would never be answered (tried: a 4 KiB asynchronous
/// direct-write loop beside buffered readers hung the mount for good, the workers
/// unkillable). So the worker hands the reply over and goes back to reading; this thread
/// drops the pages of the writes waiting (one notification per file), then replies. It
/// waits only for reads the workers answer, unless the kernel has no room left to send
/// them: its background requests (readahead, asynchronous direct writes;
/// `FuseConfiguration` allows 1024 at once) may all be writes waiting here. After
/// ``lapseAfter`` without progress, the writes waiting are answered without their pages
/// dropped (counted as lapsed, logged): their replies free the kernel's room, the reads go
/// out, and the invalidations finish after all.
///
/// A request taken from an io_uring entry can only be answered by the worker that owns
/// the entry, before its handler returns: that worker waits here instead
/// (``drop(_:of:queue:entries:)``), its entry held meanwhile. Reads on the other entries of
/// its CPU's queue, and on the other queues, go on; but should every entry of a queue hold
/// a waiting write, the reads sent from that CPU could not come in, and the invalidation
/// might wait for one of them. So at most all but one entry of a queue wait: a write that
/// comes on the last one is answered at once, its pages dropped just after (counted as
/// lapsed).
final class StalePageDrops: Sendable {
  /// Seconds one invalidation may hold the replies waiting behind it.
  static let lapseAfter = 1.0

  /// Writes answered after their stale pages went, and those answered before (lapsed),
  /// so far (one session per process).
  static let dropped = Atomic<UInt64>(0)
  static let lapsed = Atomic<UInt64>(0)

  /// Who answers a write once its pages are gone (or its wait lapsed).
  private enum Answer: @unchecked Sendable {
    /// This type, with `count` bytes. `@unchecked Sendable`: the request is replied to
    /// exactly once, by whichever thread takes its job out of `State.unreplied`.
    case reply(fuse_req_t, count: Int)
    /// The worker waiting on the semaphore (an io_uring entry's), signalled once.
    case wake(DispatchSemaphore)
  }

  /// A write waiting for its stale pages to go.
  private struct Job: Sendable {
    let id: UInt64
    let answer: Answer
    let node: NodeID
    let pages: Range<Int64>
    /// The io_uring queue whose entry the waiting worker holds, or -1.
    let queue: Int

    /// Replies, or wakes the waiting worker, which replies itself.
    func finish() {
      switch answer {
      case .reply(let request, let count): fuse_reply_write(request, count)
      case .wake(let waiter): waiter.signal()
      }
    }
  }

  private struct State: ~Copyable {
    /// Writes whose pages are still to be dropped, oldest first.
    var waiting: [Job] = []
    /// Writes not replied to yet, by id (the one being dropped included).
    var unreplied: [UInt64: Job] = [:]
    /// Of those, the ones whose worker waits holding an io_uring entry, by queue.
    var entriesHeld: [Int: Set<UInt64>] = [:]
    var nextID: UInt64 = 0
    /// Invalidations finished: the watchdog's measure of progress.
    var finished: UInt64 = 0
    var watching = false
    var stopping = false
    var running = false
  }

  /// Lock order: a leaf; never held across a notification or a reply.
  private let state = Mutex(State())
  private let work = DispatchSemaphore(value: 0)
  private let done = DispatchSemaphore(value: 0)
  private let notifier = Mutex<FuseKernelNotifier?>(nil)
  private let thread = DispatchQueue(label: "appbox.stale-pages")
  private let watchdog = DispatchQueue(label: "appbox.stale-pages.watchdog")

  /// Starts the thread, which sends its notifications through `notifier`.
  func start(notifier: FuseKernelNotifier) {
    self.notifier.withLock { $0 = notifier }
    state.withLock { $0.running = true }
    thread.async { [self] in run() }
  }

  /// Replies `count` to `request` once the kernel has dropped `pages` of `node`; at once
  /// when the session has no notifier yet (nothing is cached before the mount).
  func reply(_ request: fuse_req_t, count: Int, node: NodeID, after pages: Range<Int64>) {
    if !enqueue(.reply(request, count: count), node: node, pages: pages, queue: -1, entries: 0) {
      fuse_reply_write(request, count)
    }
  }

  /// Returns once the kernel has dropped `pages` of `node`, or the wait lapsed: for a
  /// worker that must answer its request itself, from an entry of io_uring queue `queue`,
  /// which has `entries` of them.
  func drop(_ pages: Range<Int64>, of node: NodeID, queue: Int, entries: Int) {
    let waiter = DispatchSemaphore(value: 0)
    if enqueue(.wake(waiter), node: node, pages: pages, queue: queue, entries: entries) { waiter.wait() }
  }

  /// Queues a job; false when its write must be answered now: the thread does not run,
  /// or the write came on the last free entry of its io_uring queue (its pages still go).
  private func enqueue(_ answer: Answer, node: NodeID, pages: Range<Int64>, queue: Int, entries: Int) -> Bool {
    let (queued, lastEntry) = state.withLock { state -> (Bool, Bool) in
      guard state.running, !state.stopping else { return (false, false) }
      let job = Job(id: state.nextID, answer: answer, node: node, pages: pages, queue: queue)
      state.nextID += 1
      state.waiting.append(job)
      state.unreplied[job.id] = job
      guard queue >= 0 else { return (true, false) }
      // The last entry of a queue stays free for the reads an invalidation may wait for
      // (see above): a write that would take it is answered at once.
      if state.entriesHeld[queue, default: []].count + 1 >= entries {
        state.unreplied[job.id] = nil
        return (true, true)
      }
      state.entriesHeld[queue, default: []].insert(job.id)
      return (true, false)
    }
    guard queued else { return false }
    work.signal()
    if lastEntry {
      Self.lapsed.add(1, ordering: .relaxed)
      return false  // the caller answers at once; its pages still go, just after
    }
    watch()
    return true
  }

  /// Answers `late` without their pages dropped, counted and logged.
  private func lapse(_ late: [Job], why: String) {
    guard !late.isEmpty else { return }
    for job in late { job.finish() }
    Self.lapsed.add(UInt64(late.count), ordering: .relaxed)
    let line = Array(
      "appbox: \(late.count) direct writes replied to before their stale pages left the kernel's cache (\(why))\n".utf8)
    _ = line.withUnsafeBytes { try? Sys.write(2, $0) }  // the daemon's log: a failed write there has nowhere left
  }

  /// Ends the thread once the writes waiting have been replied to, so that no reply uses a
  /// request of a destroyed session. Their invalidations fail fast once the kernel has
  /// ended the session (an unmount); after the loop was stopped by a signal with the mount
  /// still up, one may wait for a read that no worker is left to answer: after `seconds`
  /// the writes are answered without it.
  /// - Returns: whether the thread ended (if not, it may still use the session, which must
  ///   then not be destroyed).
  func stop(waiting seconds: Double = 5) -> Bool {
    let running = state.withLock { state -> Bool in
      state.stopping = true
      return state.running
    }
    guard running else { return true }
    work.signal()
    if done.wait(timeout: .now() + seconds) == .success { return true }
    let late = state.withLock { state -> [Job] in
      defer {
        state.unreplied.removeAll()
        state.entriesHeld.removeAll()
      }
      return Array(state.unreplied.values)
    }
    lapse(late, why: "the session ended with an invalidation waiting in the kernel")
    return false
  }

  private func run() {
    while true {
      work.wait()
      let batch = state.withLock { state -> [Job] in
        defer { state.waiting.removeAll() }
        return state.waiting
      }
      guard !batch.isEmpty else {
        if state.withLock({ $0.stopping && $0.waiting.isEmpty }) { break }
        continue
      }
      // The writes waiting so far, one notification per file over the span of their
      // ranges: dropping pages that were not written costs only their reading again.
      var spans: [NodeID: Range<Int64>] = [:]
      for job in batch {
        spans[job.node] =
          spans[job.node].map { min($0.lowerBound, job.pages.lowerBound)..<max($0.upperBound, job.pages.upperBound) }
          ?? job.pages
      }
      let notifier = self.notifier.withLock { $0 }
      for (node, span) in spans {
        _ = notifier?.invalidateInode(node, offset: span.lowerBound, length: span.upperBound - span.lowerBound)
      }
      let mine = state.withLock { state -> [Job] in
        state.finished += UInt64(batch.count)
        return batch.filter { job in
          if job.queue >= 0 { state.entriesHeld[job.queue]?.remove(job.id) }
          return state.unreplied.removeValue(forKey: job.id) != nil
        }
      }
      Self.dropped.add(UInt64(mine.count), ordering: .relaxed)
      for job in mine { job.finish() }
    }
    state.withLock { $0.running = false }
    done.signal()
  }

  /// Looks again after ``lapseAfter``, while writes wait; replies to all of them if no
  /// invalidation finished meanwhile.
  private func watch() {
    let progress: UInt64? = state.withLock { state in
      guard !state.watching else { return nil }
      state.watching = true
      return state.finished
    }
    guard let progress else { return }
    watchdog.asyncAfter(deadline: .now() + Self.lapseAfter) { [self] in
      let (late, again) = state.withLock { state -> ([Job], Bool) in
        state.watching = false
        guard state.finished == progress, !state.unreplied.isEmpty else { return ([], !state.unreplied.isEmpty) }
        defer {
          state.unreplied.removeAll()
          state.entriesHeld.removeAll()
        }
        return (Array(state.unreplied.values), false)
      }
      lapse(late, why: "the kernel held an invalidation over \(Self.lapseAfter) s")
      if again { watch() }
    }
  }
}
