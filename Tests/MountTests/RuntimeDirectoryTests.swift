import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The runtime directory does not keep every old mount's logs forever.
@Suite("Runtime directory", .needsFUSE, .timeLimit(.minutes(10)))
struct RuntimeDirectoryTests {
  @Test("a mount removes logs of mounts that are gone, older than a week; newer ones and running mounts' stay")
  func oldLogsArePruned() throws {
    guard let xdg = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] else {
      throw FixtureError("XDG_RUNTIME_DIR is not set (scripts/test.sh sets it)")
    }
    let directory = xdg + "/appbox"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let tag = "prune\(getpid())"
    let old = ["\(tag)-old.log", "\(tag)-old.events"]
    let kept = ["\(tag)-new.log", "\(tag)-running.log"]
    for name in old + kept { try writeFile(directory + "/" + name, bytes("x")) }
    try writeFile(directory + "/\(tag)-running.pid", bytes("\(getpid())\n"))  // a live process
    let eightDaysAgo = Date().addingTimeInterval(-8 * 24 * 3600)
    for name in old + ["\(tag)-running.log"] {
      try FileManager.default.setAttributes([.modificationDate: eightDaysAgo], ofItemAtPath: directory + "/" + name)
    }
    let fixture = try MountFixture()
    for name in old { #expect(!FileManager.default.fileExists(atPath: directory + "/" + name), "\(name) kept") }
    for name in kept { #expect(FileManager.default.fileExists(atPath: directory + "/" + name), "\(name) removed") }
    for name in kept + ["\(tag)-running.pid"] { try? FileManager.default.removeItem(atPath: directory + "/" + name) }
    try fixture.unmount()
  }
}
