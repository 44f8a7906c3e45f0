import Foundation
import Posix
import Testing

@testable import AppBoxCLI

/// The control server run in this process over a sandbox without a mount
/// (``ServedSandbox``): its accept loop, how a connection's peer is bound at accept, and
/// its deadlines. Serialized: the accept test makes every `accept` of the process fail for
/// a while, and the others run servers of their own. The time limits are generous: in the
/// whole run, synchronous mount tests can hold the test runner's threads for a long while
/// before these tests get one.
@Suite("Control server in this process", .serialized)
struct ControlServerInProcessTests {
  @Test("failing accepts (EMFILE) back off instead of spinning, and the server recovers", .timeLimit(.minutes(5)))
  func acceptErrorsDoNotSpin() throws {
    let box = try ServedSandbox(name: "accept")

    // Nothing else in this process accepts: a process-wide fault reaches only the server.
    let window = 1.5
    let (calls, failures) = try SyscallFaults.injectEverywhere([.accept: SyscallFault(Errno(rawValue: EMFILE))]) {
      faults in
      try box.server().start()
      Clock.sleep(seconds: window)
      return (faults.calls(.accept), faults.failures(.accept))
    }
    #expect(failures >= 2, "the loop kept trying")
    // Spinning would make tens of thousands of calls a second; a fixed 50 ms pause 30 in
    // the window; the doubling back-off (50, 100, 200, 400, 800 ms) about 5.
    #expect(calls <= 10, "\(calls) accept calls in \(window) s")

    // The descriptors are back: a request is answered within the longest back-off.
    let started = Clock.monotonic()
    let reply = try box.request("status")
    #expect(reply.hasPrefix("{\"ok\":true"), "\(reply)")
    #expect(Clock.monotonic() - started < ControlServer.maximumBackOff + 2)
  }
}
