import AppBoxEvents
import Dispatch
import Foundation
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS
@testable import AppBoxKit

/// AppBoxKit's follower of the daemon's event log, against the daemon's own writer
/// (AppBoxFS's `EventLog`), across rotations. (The time limit is the mount suites': in a
/// whole run the tests may wait long for a thread of the shared pool before they start.)
@Suite("Event log follower", .timeLimit(.minutes(10)))
struct EventLogFollowerTests {
  final class Changes: @unchecked Sendable {
    // @unchecked: behind `lock`.
    private let lock = NSLock()
    private var seen: [DeviceStateChange] = []
    func append(_ change: DeviceStateChange) { lock.withLock { seen.append(change) } }
    var all: [DeviceStateChange] { lock.withLock { seen } }
  }

  @Test("every state change reaches the follower, in order, while the log rotates many times")
  func acrossRotations() throws {
    let directory = try Sys.makeTemporaryDirectory(prefix: "/tmp/appbox-follower.")
    defer { _ = try? FileManager.default.removeItem(atPath: directory) }  // best effort
    let path = directory + "/20260101-000000-0001.jsonl"
    let log = EventLog(path: path, id: "20260101-000000-0001", limits: EventLogLimits(segmentBytes: 2048))
    log.flush()
    let changes = Changes()
    let follower = try EventLogFollower(path: path, owner: geteuid(), queue: DispatchQueue(label: "follower")) {
      changes.append($0)
    }
    defer { follower.cancel() }
    let states: [DeviceState] = [.unlocked, .grace, .locked]
    var expected: [DeviceStateChange] = []
    for index in 0..<600 {
      let change = DeviceStateChange(from: states[index % 3], to: states[(index + 1) % 3])
      expected.append(change)
      log.record(.state(DeviceStateEvent(time: Double(index), change: change)))
      // Other lines between them, as a busy mount writes.
      log.record(
        .purge(
          PurgeEvent(time: 0, pathBytes: Array("tmp/x\(index)".utf8), bytes: 1, domain: .tmp, reason: .age, lastUse: 0))
      )
      // Never more than a segment ahead of the follower (it reads the previous segment
      // when it is one rotation behind; two behind, a segment is gone).
      if index % 8 == 7 {
        log.flush()
        let deadline = Date().addingTimeInterval(10)
        while changes.all.count < expected.count && Date() < deadline { usleep(1_000) }
      }
    }
    log.flush()
    #expect(log.status.segment > 20, "the log rotated")
    let deadline = Date().addingTimeInterval(30)
    while changes.all.count < expected.count && Date() < deadline { usleep(10_000) }
    let seen = changes.all
    let difference = seen.indices.first { $0 >= expected.count || seen[$0] != expected[$0] }
    #expect(
      seen.count == expected.count && difference == nil, "\(seen.count) seen; first difference at \(difference ?? -1)")
  }

  @Test("a log whose header names a newer format is not followed")
  func newerFormat() throws {
    let directory = try Sys.makeTemporaryDirectory(prefix: "/tmp/appbox-follower.")
    defer { _ = try? FileManager.default.removeItem(atPath: directory) }  // best effort
    let path = directory + "/log.jsonl"
    try Sys.replaceFile(
      path, with: Array(#"{"type":"log","version":2,"mount":"x","time":1,"segment":0}"#.utf8) + [0x0A], mode: 0o600)
    #expect(throws: EventLogFollower.Refusal.newerVersion(2)) {
      _ = try EventLogFollower(path: path, owner: geteuid(), queue: DispatchQueue(label: "follower")) { _ in }
    }
  }

  @Test("a FIFO or another user's file as the log is refused at once (the caller polls), never blocks")
  func notTheOwnersFile() throws {
    let directory = try Sys.makeTemporaryDirectory(prefix: "/tmp/appbox-follower.")
    defer { _ = try? FileManager.default.removeItem(atPath: directory) }  // best effort
    let fifo = directory + "/fifo.jsonl"
    #expect(mkfifo(fifo, 0o600) == 0)
    // A writer that comes only if the open blocks, after 20 s, so that a failure ends.
    let writer = Thread {
      Thread.sleep(forTimeInterval: 20)  // the time given to the open, not a wait on it
      let fd = open(fifo, O_WRONLY | O_NONBLOCK)
      if fd >= 0 { close(fd) }
    }
    writer.start()
    let start = Clock.monotonic()
    #expect(throws: EventLogFollower.Refusal.unavailable(.notPermitted)) {
      _ = try EventLogFollower(path: fifo, owner: geteuid(), queue: DispatchQueue(label: "follower")) { _ in }
    }
    #expect(Clock.monotonic() - start < 15, "the open of the FIFO blocked")
    let theirs = directory + "/theirs.jsonl"
    try Sys.replaceFile(theirs, with: [], mode: 0o644)
    #expect(chown(theirs, 65534, 65534) == 0)
    #expect(throws: EventLogFollower.Refusal.unavailable(.notPermitted)) {
      _ = try EventLogFollower(path: theirs, owner: geteuid(), queue: DispatchQueue(label: "follower")) { _ in }
    }
  }
}
