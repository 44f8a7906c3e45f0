import AppBoxKit
import Posix
import SandboxPolicy
import Testing

/// UIKit's protected-data notifications from a real mount's state changes.
@Suite("protected-data notifications", .serialized, .timeLimit(.minutes(5)))
struct ProtectedDataMonitorTests {
  /// What observers saw: each notification's name, and whether it ran on the queue asked for.
  final class Recorder: @unchecked Sendable {
    // @unchecked: every field is behind `lock`.
    private let lock = NSLock()
    private var seen: [(name: Notification.Name, onQueue: Bool)] = []

    func record(_ name: Notification.Name, onQueue: Bool) { lock.withLock { seen.append((name, onQueue)) } }
    var names: [Notification.Name] { lock.withLock { seen.map(\.name) } }
    var allOnQueue: Bool { lock.withLock { seen.allSatisfy(\.onQueue) } }
  }

  static let will = UIApplication.protectedDataWillBecomeUnavailableNotification
  static let did = UIApplication.protectedDataDidBecomeAvailableNotification

  /// Locks and unlocks twice while `monitor` posts to `center`, observed on an
  /// `OperationQueue` running on a `DispatchQueue` of the test's; returns what was seen.
  static func lockTwice(_ mount: TestMount, _ monitor: ProtectedDataMonitor, _ center: NotificationCenter) throws
    -> Recorder
  {
    let recorder = Recorder()
    let queue = DispatchQueue(label: "observer")
    let key = DispatchSpecificKey<Int>()
    queue.setSpecific(key: key, value: 1)
    let operations = OperationQueue()
    operations.underlyingQueue = queue
    let observers = [will, did].map { name in
      center.addObserver(forName: name, object: UIApplication.shared, queue: operations) { notification in
        recorder.record(notification.name, onQueue: DispatchQueue.getSpecific(key: key) == 1)
      }
    }
    defer { observers.forEach(center.removeObserver) }
    monitor.start()
    for verb in ["lock", "unlock", "lock", "unlock"] {
      let count = recorder.names.count
      try mount.appbox([verb, mount.mountpoint])
      let deadline = Date().addingTimeInterval(10)
      while recorder.names.count == count && Date() < deadline { usleep(5_000) }
    }
    monitor.stop()
    return recorder
  }

  @Test("from the mount's event log: will and did, in order, on the observer's queue")
  func eventLog() throws {
    let mount = try TestMount(["--grace", "0"])
    let center = NotificationCenter()
    let monitor = ProtectedDataMonitor(
      container: AppBoxContainer.containing(mount.mountpoint), eventLog: try mount.eventLog(), center: center)
    let recorder = try Self.lockTwice(mount, monitor, center)
    #expect(recorder.names == [Self.will, Self.did, Self.will, Self.did])
    #expect(recorder.allOnQueue)
    #expect(monitor.source == .none, "stopped")
    try mount.unmount()
  }

  @Test("the event log is followed, not polled; without one the state is polled and the notifications are the same")
  func sources() throws {
    let mount = try TestMount(["--grace", "0"])
    let container = AppBoxContainer.containing(mount.mountpoint)
    let following = ProtectedDataMonitor(container: container, eventLog: try mount.eventLog())
    following.start()
    #expect(following.source == .eventLog)
    following.stop()
    let center = NotificationCenter()
    let polling = ProtectedDataMonitor(container: container, eventLog: nil, center: center)
    polling.start()
    #expect(polling.source == .polling)
    let recorder = try Self.lockTwice(mount, polling, center)
    #expect(recorder.names == [Self.will, Self.did, Self.will, Self.did])
    // A log that cannot be followed (gone): polling.
    let missing = ProtectedDataMonitor(container: container, eventLog: mount.directory.path + "/no-such.jsonl")
    missing.start()
    #expect(missing.source == .polling)
    missing.stop()
    try mount.unmount()
  }

  @Test("an event log that is a FIFO or another user's file is not followed (polled instead), and blocks nothing")
  func foreignEventLog() throws {
    let mount = try TestMount(["--grace", "0"])
    let container = AppBoxContainer.containing(mount.mountpoint)
    let fifo = mount.directory.path + "/fifo.events"
    #expect(mkfifo(fifo, 0o600) == 0)
    let theirs = mount.directory.path + "/theirs.events"
    #expect(FileManager.default.createFile(atPath: theirs, contents: Data()))
    #expect(chown(theirs, 65534, 65534) == 0)
    for log in [fifo, theirs] {
      let monitor = ProtectedDataMonitor(container: container, eventLog: log)
      let started = DispatchSemaphore(value: 0)
      Thread {
        monitor.start()
        started.signal()
      }.start()
      if started.wait(timeout: .now() + 20) == .timedOut {
        Issue.record("start() blocked on \(log)")
        // Lets the blocked open of the FIFO go (a writer comes).
        let writer = open(fifo, O_WRONLY | O_NONBLOCK)
        if writer >= 0 { close(writer) }
        _ = started.wait(timeout: .now() + 20)
      }
      #expect(monitor.source == .polling, "\(log)")
      monitor.stop()
    }
    try mount.unmount()
  }

  @Test("outside a mount nothing is watched and protected data is available")
  func outside() {
    let monitor = ProtectedDataMonitor(container: nil, eventLog: nil)
    monitor.start()
    #expect(monitor.source == .none)
    #expect(monitor.isProtectedDataAvailable)
  }

  @Test(
    "which change posts what",
    arguments: [
      (DeviceState.unlocked, DeviceState.grace, Optional(will)), (.unlocked, .locked, will), (.grace, .locked, nil),
      (.grace, .unlocked, did), (.locked, .unlocked, did), (.bfu, .unlocked, did), (.locked, .grace, nil),
    ])
  func notifications(_ from: DeviceState, _ to: DeviceState, _ expected: Notification.Name?) {
    #expect(ProtectedDataMonitor.notification(for: DeviceStateChange(from: from, to: to)) == expected)
  }
}

extension TestMount {
  /// The mount's event log, as `appbox run` names it to its program (`APPBOX_EVENTS`).
  func eventLog() throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Self.appbox)
    process.arguments = ["run", mountpoint, "--", "/bin/sh", "-c", "printf %s \"$APPBOX_EVENTS\""]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let path = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    try #require(process.terminationStatus == 0 && path.hasSuffix(".jsonl"), "APPBOX_EVENTS: \(path)")
    return path
  }
}
