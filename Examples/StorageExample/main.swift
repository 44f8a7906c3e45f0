// An iOS-style storage routine, written as for a device: only `import AppBoxKit` differs
// (in place of `import Foundation` / `import UIKit`). `appbox run -- appbox-storage-example`
// runs it in a sandbox; it prints what it saw as `key=value` lines for the tests.
//
//   appbox-storage-example            store, protect, exclude, measure, report
//   appbox-storage-example lock-cycle wait for a lock and an unlock, closing the secret
//   appbox-storage-example self-lock  lock and unlock the device itself (AppBoxDevice)
//   appbox-storage-example image-cache SOURCE NAME...
//                                     fetch each image twice through a memory + disk cache
import AppBoxKit

let fileManager = FileManager.default

/// Prints one `key=value` line at once (no buffering: the tests read it as it happens).
func report(_ key: String, _ value: Any?) {
  FileHandle.standardOutput.write(Data("\(key)=\(value.map { "\($0)" } ?? "nil")\n".utf8))
}

/// The open secret; touched only on the serial `events` queue and before observing.
final class OpenSecret: @unchecked Sendable {
  var handle: FileHandle?
  init(_ handle: FileHandle) { self.handle = handle }
}

func directory(_ kind: FileManager.SearchPathDirectory) -> URL {
  fileManager.urls(for: kind, in: .userDomainMask)[0]
}

func storeAndReport() throws {
  let documents = directory(.documentDirectory)
  let support = directory(.applicationSupportDirectory)
  let caches = directory(.cachesDirectory)
  report("home", NSHomeDirectory())
  report("documents", documents.path)
  report("support", support.path)
  report("caches", caches.path)
  report("library", fileManager.urls(for: .libraryDirectory, in: .userDomainMask).first?.path)
  report("tmp", fileManager.temporaryDirectory.path)

  // A JSON document store in Application Support: atomic, class complete.
  let store = support.appendingPathComponent("store.json")
  let document = try JSONSerialization.data(withJSONObject: ["notes": ["first"]])
  try document.write(to: store, options: [.atomic, .completeFileProtection])
  report("store.protection", try fileManager.attributesOfItem(atPath: store.path)[.protectionKey])

  // A note in Documents, class B, written in place; then made class D.
  let note = documents.appendingPathComponent("note.txt")
  try Data("hello".utf8).write(to: note, options: .completeFileProtectionUnlessOpen)
  report("note.protection", try fileManager.attributesOfItem(atPath: note.path)[.protectionKey])
  try fileManager.setAttributes([.protectionKey: FileProtectionType.none], ofItemAtPath: note.path)
  report("note.protection.after", try fileManager.attributesOfItem(atPath: note.path)[.protectionKey])
  report("note.fileProtection", try note.resourceValues(forKeys: [.fileProtectionKey]).fileProtection?.rawValue)

  // A downloads folder excluded from backup; a file in it is excluded through it.
  var downloads = support.appendingPathComponent("Downloads", isDirectory: true)
  try fileManager.createDirectory(at: downloads, withIntermediateDirectories: true)
  var exclusion = URLResourceValues()
  exclusion.isExcludedFromBackup = true
  try downloads.setResourceValues(exclusion)
  let download = downloads.appendingPathComponent("big.bin")
  try Data(count: 4096).write(to: download)
  report("downloads.excluded", try downloads.resourceValues(forKeys: [.isExcludedFromBackupKey]).isExcludedFromBackup)
  report("download.excluded", try download.resourceValues(forKeys: [.isExcludedFromBackupKey]).isExcludedFromBackup)

  // Excluded, then included again: Apple's attribute goes away.
  var flip = caches.appendingPathComponent("flip.dat")
  try Data("x".utf8).write(to: flip)
  try flip.setResourceValues(exclusion)
  var inclusion = URLResourceValues()
  inclusion.isExcludedFromBackup = false
  try flip.setResourceValues(inclusion)
  report("flip.excluded", try flip.resourceValues(forKeys: [.isExcludedFromBackupKey]).isExcludedFromBackup)
  report("store.excluded", try store.resourceValues(forKeys: [.isExcludedFromBackupKey]).isExcludedFromBackup)

  // Capacity the iOS way, and a graceful refusal of a write that does not fit.
  let capacity = try support.resourceValues(forKeys: [
    .volumeAvailableCapacityForImportantUsageKey, .volumeAvailableCapacityForOpportunisticUsageKey,
  ])
  report("important", capacity.volumeAvailableCapacityForImportantUsage)
  report("opportunistic", capacity.volumeAvailableCapacityForOpportunisticUsage)
  let large: Int64 = 1 << 40
  report(
    "large.write",
    (capacity.volumeAvailableCapacityForImportantUsage ?? 0) < large ? "refused by the capacity check" : "fits")

  report("protectedDataAvailable", UIApplication.shared.isProtectedDataAvailable)
  UserDefaults.standard.set("dark", forKey: "theme")
  report("defaultsSynchronized", UserDefaults.standard.synchronize())
}

/// Keeps a class `complete` secret open, closes it on will-become-unavailable, and reads
/// it again after did-become-available. Prints each step as it happens.
func lockCycle() throws {
  let secret = directory(.applicationSupportDirectory).appendingPathComponent("secret")
  try Data("s3cret".utf8).write(to: secret, options: [.atomic, .completeFileProtection])
  let events = OperationQueue()
  events.maxConcurrentOperationCount = 1
  let center = NotificationCenter.default
  let gone = DispatchSemaphore(value: 0)
  let back = DispatchSemaphore(value: 0)
  let open = OpenSecret(try FileHandle(forReadingFrom: secret))
  let will = center.addObserver(
    forName: UIApplication.protectedDataWillBecomeUnavailableNotification, object: nil, queue: events
  ) { _ in
    try? open.handle?.close()
    open.handle = nil
    report("event", "willBecomeUnavailable")
    gone.signal()
  }
  let did = center.addObserver(
    forName: UIApplication.protectedDataDidBecomeAvailableNotification, object: nil, queue: events
  ) { _ in
    report("event", "didBecomeAvailable")
    back.signal()
  }
  report("ready", true)
  gone.wait()
  // The device is locking: wait until class A closes, as the app sees it.
  while UIApplication.shared.isProtectedDataAvailable { usleep(20_000) }
  do {
    _ = try Data(contentsOf: secret)
    report("locked.read", "ok")
  } catch let error as CocoaError {
    report("locked.read", "\(error.code.rawValue) \(error.underlying.map { ($0 as NSError).code } ?? 0)")
  }
  // Background work on class C data goes on while locked.
  let log = directory(.applicationSupportDirectory).appendingPathComponent("background.log")
  try Data("still working".utf8).write(to: log, options: .completeFileProtectionUntilFirstUserAuthentication)
  report("locked.c.write", String(decoding: try Data(contentsOf: log), as: UTF8.self))
  back.wait()
  report("unlocked.read", String(decoding: try Data(contentsOf: secret), as: UTF8.self))
  center.removeObserver(will)
  center.removeObserver(did)
}

/// A two-level image cache: memory, then files in Caches named by a hash of the URL, then
/// the source. A purge of Caches costs a re-fetch, never an error.
final class ImageCache {
  private var memory: [URL: Data] = [:]
  private let folder = directory(.cachesDirectory).appendingPathComponent("images", isDirectory: true)

  /// Where the image comes from, and its bytes.
  func image(at url: URL) throws -> (source: String, data: Data) {
    if let data = memory[url] { return ("memory", data) }
    let file = folder.appendingPathComponent(Self.key(url))
    if let data = try? Data(contentsOf: file) {  // a miss (never cached, or purged) is not an error
      memory[url] = data
      return ("disk", data)
    }
    let data = try Data(contentsOf: url)  // the "network"
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try data.write(to: file, options: .atomic)
    memory[url] = data
    return ("fetched", data)
  }

  /// FNV-1a of the URL, in hex: stable across runs (`Hasher` is seeded per process).
  static func key(_ url: URL) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in url.absoluteString.utf8 {
      hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
    }
    return String(hash, radix: 16)
  }
}

func imageCache(source: String, names: [String]) throws {
  let cache = ImageCache()
  for name in names {
    let url = URL(fileURLWithPath: source).appendingPathComponent(name)
    let first = try cache.image(at: url)
    let second = try cache.image(at: url)
    report(name, "\(first.source),\(second.source),\(first.data.count)")
  }
}

/// A test suite's way to lock at a chosen moment: allowed only with
/// `appbox run --allow-device-control`.
func selfLock() {
  report("allowed", AppBoxDevice.isAllowed)
  do {
    report("lock", try AppBoxDevice.lock())
    report("available", UIApplication.shared.isProtectedDataAvailable)
    report("unlock", try AppBoxDevice.unlock())
  } catch {
    report("refused", error)
  }
}

do {
  switch CommandLine.arguments.dropFirst().first {
  case "lock-cycle": try lockCycle()
  case "self-lock": selfLock()
  case "image-cache":
    let arguments = Array(CommandLine.arguments.dropFirst(2))
    try imageCache(source: arguments[0], names: Array(arguments.dropFirst()))
  default: try storeAndReport()
  }
} catch {
  print("error=\(error)")
  exit(1)
}
