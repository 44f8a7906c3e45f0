import CFuseDevice
import Foundation
import Testing

// While requests come back to back, the reader polls for the next one before it sleeps
// (busy_poll.c); a wait longer than the window turns polling off until a wait is short again.
// These tests are in the reader's suite: its state is global, and they run one at a time.
extension RequestReaderTests {
  /// Takes one request through the reader, sent `delay` seconds later by another thread.
  /// Returns how the reader took it: by polling or by waiting in read().
  static func take(_ device: Device, sentAfter delay: Double) throws -> Taken {
    let before = cfuse_device_busy_poll_stats()
    if delay == 0 {
      try device.send(.getattr)
    } else {
      Thread { [device] in
        Thread.sleep(forTimeInterval: delay)
        try? device.send(.getattr)
      }.start()
    }
    var buffer = [UInt8](repeating: 0, count: 4096)
    let got = buffer.withUnsafeMutableBytes { cfuse_device_take_request(device.reading, $0.baseAddress, $0.count) }
    #expect(got == Request.getattr.message.count)
    let after = cfuse_device_busy_poll_stats()
    switch (after.polled - before.polled, after.waited - before.waited) {
    case (1, 0): return .polled
    case (0, 1): return .waited
    default: return .miscounted
    }
  }

  /// How the reader took a request.
  enum Taken { case polled, waited, miscounted }

  @Test("a request that comes within the window is found by polling")
  func requestWithinTheWindowIsPolled() throws {
    let device = try Device()
    cfuse_device_set_busy_poll(1_000_000)
    defer { cfuse_device_set_busy_poll(0) }
    #expect(try Self.take(device, sentAfter: 0) != .miscounted)  // queued already: a short wait
    #expect(try Self.take(device, sentAfter: 0.05) == .polled)
    #expect(try Self.take(device, sentAfter: 0.05) == .polled)
  }

  @Test("a wait longer than the window turns polling off; a short wait turns it on again")
  func pollingFollowsTheTraffic() throws {
    let device = try Device()
    cfuse_device_set_busy_poll(200_000)
    defer { cfuse_device_set_busy_poll(0) }
    #expect(try Self.take(device, sentAfter: 0) != .miscounted)
    #expect(try Self.take(device, sentAfter: 0.6) == .waited, "polled past the window")
    #expect(try Self.take(device, sentAfter: 0.02) == .waited, "polled after a long wait")
    #expect(try Self.take(device, sentAfter: 0.02) == .polled, "did not poll after a short wait")
  }

  @Test("with a window of 0 the reader never polls")
  func zeroWindowNeverPolls() throws {
    let device = try Device()
    cfuse_device_set_busy_poll(0)
    #expect(try Self.take(device, sentAfter: 0) == .waited)
    #expect(try Self.take(device, sentAfter: 0.02) == .waited)
    #expect(cfuse_device_busy_poll_stats().microseconds == 0)
  }
}
