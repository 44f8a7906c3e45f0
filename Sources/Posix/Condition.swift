import CPosixShim
import Synchronization

/// A condition that threads wait on until another thread has changed what they wait for:
/// the condition variable that `Synchronization.Mutex` lacks, over one futex word.
///
/// The word counts notifications (an "event count"). A waiter reads the count, then
/// checks its condition (typically under the mutex that guards the state), and sleeps
/// only while the count is still what it read; a thread that changes the state calls
/// ``notifyAll()`` after the change. So a notification that comes between the check and
/// the sleep is never lost, and, unlike a `pthread_cond_t`, the waiter holds no lock
/// while it sleeps and the mutex stays a plain `Synchronization.Mutex`. A notification
/// with nobody waiting costs two atomic operations and no system call.
///
/// ```swift
/// let books = Mutex(Books())
/// let victimsGone = Condition()
/// // waiter
/// victimsGone.wait(for: books) { $0.inFlight[ino] == nil }
/// // notifier, after taking the victim out of `inFlight` under the lock
/// victimsGone.notifyAll()
/// ```
///
/// Waiters wake for every notification and check again (a broadcast; there is no
/// `signal` of one): meant for rare waits, such as a request that meets a purge between
/// two of its steps. The count wraps after 2³² notifications; a waiter that slept through
/// exactly that many would sleep on, which no wait here comes near.
public final class Condition: @unchecked Sendable {
  // @unchecked: the word is only ever touched through the C functions' atomic operations
  // and the futex system call, from any thread; it lives as long as this object.
  private let word: UnsafeMutablePointer<cposix_wait_word>

  /// A condition nobody waits on yet.
  public init() {
    word = .allocate(capacity: 1)
    word.initialize(to: cposix_wait_word(count: 0, waiters: 0))
  }

  deinit {
    word.deinitialize(count: 1)
    word.deallocate()
  }

  /// Wakes every thread waiting now. Call it after the change it announces is visible
  /// to the waiters' check (after the mutex guarding the state was released, or inside
  /// it: a woken waiter then waits for the mutex).
  public func notifyAll() {
    cposix_wait_word_notify_all(word)
  }

  /// The notifications so far: read it before trying something that may have to wait,
  /// then ``wait(afterNotifications:deadline:)`` sleeps only if none came since.
  public var notifications: UInt32 { cposix_wait_word_load(word) }

  /// Sleeps until a notification comes after the `seen` ones (returning at once if one
  /// came already), or until `deadline` (``Clock/monotonic()`` seconds; nil: none).
  /// May return early (a signal): callers check their condition again.
  /// - Returns: false when the deadline passed.
  @discardableResult
  public func wait(afterNotifications seen: UInt32, deadline: Double? = nil) -> Bool {
    var timeout: Int64 = -1
    if let deadline {
      let left = deadline - Clock.monotonic()
      guard left > 0 else { return false }
      timeout = Int64(min(left, 1e9) * 1e9)
    }
    return cposix_wait_word_wait(word, seen, timeout) != ETIMEDOUT
  }

  /// Waits until `isSatisfied()` is true, checking it again after each notification.
  /// - Parameter deadline: ``Clock/monotonic()`` seconds after which to give up (nil:
  ///   wait as long as it takes).
  /// - Returns: whether the condition holds (false only when the deadline passed first).
  @discardableResult
  public func wait(deadline: Double? = nil, until isSatisfied: () -> Bool) -> Bool {
    while true {
      let seen = notifications
      if isSatisfied() { return true }
      if !wait(afterNotifications: seen, deadline: deadline), !isSatisfied() { return false }
    }
  }

  /// Waits until `predicate` holds of the value `mutex` guards, checked under its lock
  /// (released while this sleeps).
  /// - Returns: whether it holds (false only when `deadline` passed first).
  @discardableResult
  public func wait<Value: ~Copyable>(
    for mutex: borrowing Mutex<Value>, deadline: Double? = nil, until predicate: (inout Value) -> Bool
  ) -> Bool {
    wait(deadline: deadline) { mutex.withLock { predicate(&$0) } }
  }
}

#if canImport(Glibc)
  import Glibc
#endif
