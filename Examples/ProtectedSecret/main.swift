// A class `complete` secret kept open while the device is unlocked and closed on
// protected-data-will-become-unavailable, as iOS apps must before class A closes; while
// locked the app keeps working in the background on `completeUntilFirstUserAuthentication`
// data; after protected-data-did-become-available it reads the secret again.
//
//   appbox run [--grace 2s] -- appbox-example-protected-secret
//       waits for a lock and an unlock (appbox lock / unlock from your terminal)
//   appbox run --allow-device-control -- appbox-example-protected-secret --lock-myself
//       locks and unlocks the device itself, as a test suite does (AppBoxDevice)
//
// Prints each step as it happens, as `key=value` lines.
import AppBoxKit

func report(_ key: String, _ value: Any?) {
  FileHandle.standardOutput.write(Data("\(key)=\(value.map { "\($0)" } ?? "nil")\n".utf8))
}

/// The open secret; touched only on the serial `events` queue, and before observing.
final class OpenSecret: @unchecked Sendable {
  var handle: FileHandle?
}

let lockMyself = CommandLine.arguments.dropFirst().first == "--lock-myself"
let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
let secret = support.appendingPathComponent("secret")
let journal = support.appendingPathComponent("background.log")

/// Locks or unlocks through AppBoxDevice; a refusal ends the program with 77.
func control(_ change: () throws(AppBoxDevice.ControlError) -> String) {
  do { _ = try change() } catch {
    report("control", "refused: \(error)")
    exit(77)
  }
}

do {
  try FileManager.default.createDirectory(at: support, withIntermediateDirectories: true)
  try Data("s3cret".utf8).write(to: secret, options: [.atomic, .completeFileProtection])
  let open = OpenSecret()
  open.handle = try FileHandle(forReadingFrom: secret)
  let events = OperationQueue()
  events.maxConcurrentOperationCount = 1
  let gone = DispatchSemaphore(value: 0)
  let back = DispatchSemaphore(value: 0)
  let center = NotificationCenter.default
  let will = center.addObserver(
    forName: UIApplication.protectedDataWillBecomeUnavailableNotification, object: nil, queue: events
  ) { _ in
    try? open.handle?.close()
    open.handle = nil
    report("event", "willBecomeUnavailable")
    report("willAt", Date().timeIntervalSince1970)
    gone.signal()
  }
  let did = center.addObserver(
    forName: UIApplication.protectedDataDidBecomeAvailableNotification, object: nil, queue: events
  ) { _ in
    report("event", "didBecomeAvailable")
    back.signal()
  }
  report("source", ProtectedDataMonitor.shared.source)
  report("ready", true)
  if lockMyself { control(AppBoxDevice.lock) }
  gone.wait()
  // The device is locking: class A closes when the grace period ends.
  while UIApplication.shared.isProtectedDataAvailable { usleep(20_000) }
  do {
    _ = try Data(contentsOf: secret)
    report("locked.read", "ok")
  } catch let error as CocoaError {
    report("locked.read", "\(error.code.rawValue) \(error.underlying.map { ($0 as NSError).code } ?? 0)")
  }
  // Background work on class C data goes on while locked.
  try Data("still working".utf8).write(to: journal, options: .completeFileProtectionUntilFirstUserAuthentication)
  report("locked.c.write", String(decoding: try Data(contentsOf: journal), as: UTF8.self))
  if lockMyself { control(AppBoxDevice.unlock) }
  back.wait()
  report("unlocked.read", String(decoding: try Data(contentsOf: secret), as: UTF8.self))
  center.removeObserver(will)
  center.removeObserver(did)
} catch {
  report("error", error)
  exit(1)
}
