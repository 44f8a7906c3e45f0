import Dispatch
import Foundation
import Posix
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `Condition`: the futex word that request threads sleep on instead of spinning. The
/// time limit is generous: in the whole run, synchronous mount tests can hold the test
/// runner's threads for minutes before these get one (a lost wake-up hangs for ever).
@Suite("Condition: waiting on a futex word beside a Mutex", .timeLimit(.minutes(10)))
struct ConditionTests {
  /// Runs `body` on a thread of its own; the returned group is left when it returns.
  static func spawn(_ body: @escaping @Sendable () -> Void) -> DispatchGroup {
    let group = DispatchGroup()
    group.enter()
    Foundation.Thread {
      body()
      group.leave()
    }.start()
    return group
  }

  @Test("a satisfied condition returns at once, without a notification")
  func satisfied() {
    let condition = Condition()
    let value = Mutex(1)
    #expect(condition.wait(for: value) { $0 == 1 })
    #expect(condition.notifications == 0)
  }

  @Test("a waiter sleeps (not runnable) until the change is notified, then sees it")
  func sleepsUntilNotified() throws {
    let condition = Condition()
    let value = Mutex(0)
    let waiter = Mutex<pid_t>(0)
    let seen = Mutex<Int?>(nil)
    let done = Self.spawn {
      waiter.withLock { $0 = Sys.threadID }
      condition.wait(for: value) { $0 != 0 }
      seen.withLock { $0 = value.withLock { $0 } }
    }
    let tid = try #require(ThreadState.eventually { waiter.withLock { $0 } != 0 } ? waiter.withLock { $0 } : nil)
    // Asleep in the kernel (state S), not yielding in a loop (state R): a thread that
    // spins is runnable whenever it is looked at.
    #expect(ThreadState.eventually { ThreadState.isSleeping(tid) }, "the waiter sleeps")
    #expect(seen.withLock { $0 } == nil, "and has not returned")
    value.withLock { $0 = 7 }
    condition.notifyAll()
    #expect(done.wait(timeout: .now() + 10) == .success)
    #expect(seen.withLock { $0 } == 7)
  }

  @Test("a notification between the check and the sleep is not lost")
  func notificationBeforeSleep() {
    let condition = Condition()
    let seen = condition.notifications
    condition.notifyAll()
    // Returns at once: a notification came after `seen`.
    #expect(condition.wait(afterNotifications: seen, deadline: Clock.monotonic() + 60))
    #expect(condition.notifications == seen &+ 1)
  }

  @Test("a deadline ends the wait, with the condition still false")
  func deadline() {
    let condition = Condition()
    let start = Clock.monotonic()
    #expect(!condition.wait(deadline: start + 0.05) { false })
    #expect(Clock.monotonic() - start >= 0.05)
  }

  @Test("every waiter wakes for one notification")
  func broadcast() {
    let condition = Condition()
    let open = Mutex(false)
    let groups = (0..<4).map { _ in Self.spawn { condition.wait(for: open) { $0 } } }
    open.withLock { $0 = true }
    condition.notifyAll()
    for group in groups { #expect(group.wait(timeout: .now() + 10) == .success) }
  }

  /// Two threads hand a token back and forth through one mutex and one condition: a lost
  /// wake-up would leave both asleep (the time limit fails the test).
  @Test("10,000 hand-overs between two threads lose no wake-up")
  func pingPong() {
    let condition = Condition()
    let turn = Mutex(0)  // even: the first thread's turn; odd: the second's
    let rounds = 10_000
    let second = Self.spawn {
      for round in 0..<rounds {
        condition.wait(for: turn) { $0 == 2 * round + 1 }
        turn.withLock { $0 += 1 }
        condition.notifyAll()
      }
    }
    for round in 0..<rounds {
      condition.wait(for: turn) { $0 == 2 * round }
      turn.withLock { $0 += 1 }
      condition.notifyAll()
    }
    #expect(second.wait(timeout: .now() + 60) == .success)
    #expect(turn.withLock { $0 } == 2 * rounds)
  }
}

/// A thread of this process as `/proc/self/task` shows it.
enum ThreadState {
  /// Whether thread `tid` sleeps (state `S` or `D` in `/proc/self/task/TID/stat`).
  static func isSleeping(_ tid: pid_t) -> Bool {
    guard let bytes = try? Sys.readFile("/proc/self/task/\(tid)/stat"),
      let close = bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < bytes.count
    else { return false }
    return bytes[close + 2] == UInt8(ascii: "S") || bytes[close + 2] == UInt8(ascii: "D")
  }

  /// Waits up to ten seconds for `condition`, looking every millisecond.
  static func eventually(_ condition: () -> Bool) -> Bool {
    let deadline = Clock.monotonic() + 10
    while !condition() {
      if Clock.monotonic() > deadline { return false }
      Clock.sleep(seconds: 0.001)
    }
    return true
  }
}
