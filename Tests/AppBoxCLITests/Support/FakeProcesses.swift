import Posix
import Synchronization

@testable import AppBoxCLI

#if canImport(Glibc)
  import Glibc
#endif

/// A process table of the test's own, in place of `/proc`: parents and start times, and
/// errors a read of a given process's `stat` returns (a number of times, or always).
final class FakeProcesses: Sendable {
  private struct State {
    var processes: [pid_t: ProcessStat] = [:]
    var faults: [pid_t: (errno: Errno, times: Int?)] = [:]
    var reads = 0
  }
  private let state = Mutex(State())

  /// Adds `pid` as a child of `parent`, started at `start` (after its parent).
  func add(_ pid: pid_t, parent: pid_t, start: UInt64 = 100) {
    state.withLock { $0.processes[pid] = ProcessStat(parent: parent, startTime: start) }
  }

  /// `pid` exits.
  func remove(_ pid: pid_t) { state.withLock { $0.processes[pid] = nil } }

  /// Reads of `pid` fail with `errno`, `times` times (nil: until cleared).
  func fail(_ pid: pid_t, _ errno: Errno, times: Int? = nil) { state.withLock { $0.faults[pid] = (errno, times) } }

  /// Reads so far.
  var reads: Int { state.withLock { $0.reads } }

  /// The reader the gate is given.
  var reader: DeviceControlGate.StatReader {
    { [self] pid throws(Errno) in
      let result: Result<ProcessStat, Errno> = state.withLock { state in
        state.reads += 1
        if let fault = state.faults[pid] {
          if let times = fault.times {
            state.faults[pid] = times > 1 ? (fault.errno, times - 1) : nil
          }
          return .failure(fault.errno)
        }
        guard let stat = state.processes[pid] else { return .failure(.noEntry) }
        return .success(stat)
      }
      return try result.get()
    }
  }

  /// A chain below `top`: pids `first`, `first`+1, … each the child of the one before.
  func chain(below top: pid_t, from first: pid_t, count: Int) -> pid_t {
    var parent = top
    for pid in first..<(first + pid_t(count)) {
      add(pid, parent: parent)
      parent = pid
    }
    return parent
  }
}

/// Lines the gate logged.
final class LogLines: Sendable {
  private let lines = Mutex<[String]>([])
  var all: [String] { lines.withLock { $0 } }
  var sink: @Sendable (String) -> Void { { [self] line in lines.withLock { $0.append(line) } } }
}
