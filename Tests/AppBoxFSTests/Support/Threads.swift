import Dispatch
import Foundation
import Posix
import Synchronization

/// A request served on a thread of its own, as a FUSE worker would serve it, so that a
/// test can look at the thread while it waits.
final class RequestThread: Sendable {
  private let done = DispatchGroup()
  private let tid = Mutex<pid_t>(0)

  /// Starts `body` on a new thread.
  init(_ body: @escaping @Sendable () -> Void) {
    done.enter()
    Foundation.Thread { [self] in
      tid.withLock { $0 = Sys.threadID }
      body()
      done.leave()
    }.start()
  }

  /// Whether the thread is asleep in the kernel (state `S` or `D` in
  /// `/proc/self/task/TID/stat`), as a thread blocked on a futex is; a thread that spins
  /// (`sched_yield` in a loop) is runnable (`R`) whenever it is looked at.
  var isSleeping: Bool {
    let tid = tid.withLock { $0 }
    guard tid != 0, let bytes = try? Sys.readFile("/proc/self/task/\(tid)/stat"),
      let close = bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < bytes.count
    else { return false }  // not started yet, or gone
    return bytes[close + 2] == UInt8(ascii: "S") || bytes[close + 2] == UInt8(ascii: "D")
  }

  /// Whether the request has returned.
  var isFinished: Bool { done.wait(timeout: .now()) == .success }

  /// Waits up to `seconds` for the request to return.
  func finish(within seconds: Double = 30) -> Bool {
    done.wait(timeout: .now() + seconds) == .success
  }
}
