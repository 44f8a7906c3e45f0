import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A stored class that names no class is `complete` on a real mount: the kernel gets
/// EPERM while LOCKED, with nothing served from its page cache. The decisions themselves
/// are tested below the mount (AppBoxFSTests, `UnreadableClassTests`).
@Suite("Classes that cannot be used, on a mount", .needsFUSE, .timeLimit(.minutes(5)))
struct UnreadableClassMountTests {
  @Test("a file whose class names no class is refused while LOCKED, readable unlocked, reported once")
  func refusedWhileLocked() throws {
    let fixture = try MountFixture.unlocked(["--grace", "0"]) { backing in
      try FileManager.default.createDirectory(atPath: backing + "/Documents", withIntermediateDirectories: true)
      try Data("secret".utf8).write(to: URL(fileURLWithPath: backing + "/Documents/f"))
      #expect(Sys2.setxattr(backing + "/Documents/f", ProtectionAttribute.protection, "Complete") == 0)
    }
    let file = fixture.path("Documents/f")
    #expect(try Sys2.getxattr(file, ProtectionAttribute.protection).get() == "complete")
    let earlier = open(file, O_RDONLY)
    try #require(earlier >= 0)
    var buffer = [UInt8](repeating: 0, count: 6)
    #expect(pread(earlier, &buffer, 6, 0) == 6, "readable while unlocked (and in the page cache now)")
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    #expect(Outcome(open(file, O_RDONLY)) == .eperm)
    #expect(Outcome(Int32(pread(earlier, &buffer, 6, 0))) == .eperm, "not served from the page cache either")
    close(earlier)
    try fixture.control("unlock")
    try fixture.waitForState("UNLOCKED")
    #expect(try String(contentsOfFile: file, encoding: .utf8) == "secret")
    let reports = try fixture.events().filter { $0["type"] as? String == "unreadableClass" }
    #expect(reports.count == 1)
    #expect(reports.first?["path"] as? String == "Documents/f")
    #expect(reports.first?["value"] as? String == "Complete")
    #expect(try fixture.status()["unreadableClasses"] as? Int == 1)
    try fixture.unmount()
  }

  @Test("a backing directory whose recorded default names no class is not mounted: exit 65, and why")
  func badDefaultRefused() throws {
    let directories = try SandboxDirectories()
    #expect(Sys2.setxattr(directories.backing, "user.appbox.default-protection", "Complete") == 0)
    let result = try Command.run(
      Command.appbox, ["mount", "--backing", directories.backing, "--unlocked", directories.mountpoint])
    defer {  // should the mount have come up after all
      if MountFixture.isMounted(directories.mountpoint) {
        _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint])
      }
    }
    #expect(result.status == 65, "\(result.status): \(result.error)")
    #expect(result.error.contains("names no protection class"), "\(result.error)")
    #expect(!MountFixture.isMounted(directories.mountpoint))
    #expect((try? FileManager.default.contentsOfDirectory(atPath: directories.backing))?.isEmpty == true)
  }
}
