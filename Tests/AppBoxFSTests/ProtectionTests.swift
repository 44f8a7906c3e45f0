import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// docs/reference.md's Data Protection refusals while LOCKED, class by class, through the protocol.
@Suite("Data Protection through the protocol")
struct ProtectionTests {
  /// A class, and whether opening an existing file and creating a new one are allowed
  /// while LOCKED.
  static let locked: [(ProtectionClass, open: Bool, create: Bool)] = [
    (.complete, open: false, create: false),
    (.completeUnlessOpen, open: false, create: true),
    (.completeUntilFirstUserAuthentication, open: true, create: true),
    (.none, open: true, create: true),
    // CX: as C until the inactivity timeout (default 48 h) has passed since the lock.
    (.completeWhenUserInactive, open: true, create: true),
  ]

  @Test("while locked, a class refuses with EPERM what docs/reference.md says", arguments: locked)
  func refusals(_ protectionClass: ProtectionClass, open: Bool, create: Bool) throws {
    let box = try Sandbox()
    _ = try box.mkdir("Documents/d")
    try box.setxattr("Documents/d", "user.appbox.protection", protectionClass.name)
    try box.makeFile("Documents/d/old", bytes: 10)
    let earlier = try box.open("Documents/d/old")  // opened before the lock
    #expect(box.fs.lock() == .locked)
    let before = box.fs.protection.counters.withLock { $0.totalRefusals }

    if open {
      box.release(try box.open("Documents/d/old"))
    } else {
      #expect(throws: Errno.notPermitted) { try box.open("Documents/d/old") }
    }
    if create {
      box.release(try box.create("Documents/d/new"))
    } else {
      #expect(throws: Errno.notPermitted) { try box.create("Documents/d/new") }
      #expect(!box.backingHas("Documents/d/new"))
    }
    // Handle I/O on a file opened earlier: refused for A only.
    if protectionClass == .complete {
      #expect(throws: Errno.notPermitted) { try box.read(earlier, count: 10) }
    } else {
      #expect(try box.read(earlier, count: 10).count == 10)
    }
    box.release(earlier)
    // Names are always available: unlink works in every state.
    try box.unlink("Documents/d/old")

    let refusals = (open ? 0 : 1) + (create ? 0 : 1) + (protectionClass == .complete ? 1 : 0)
    #expect(box.fs.protection.counters.withLock { $0.totalRefusals } - before == refusals)
    #expect(box.events("refusal").count == refusals)
    if protectionClass == .complete {
      #expect(box.eventually { box.notifier.calls.contains { if case .invalidateInode = $0 { true } else { false } } })
    }
    #expect(box.fs.unlock() == .unlocked)
    try box.expectExactBooks()
  }

  @Test("before the first unlock (BFU) C refuses too, and D does not")
  func beforeFirstUnlock() throws {
    let box = try Sandbox { $0.startUnlocked = false }
    #expect(box.fs.deviceState == .bfu)
    #expect(throws: Errno.notPermitted) { try box.create("Documents/c") }  // the container default, C
    _ = try box.mkdir("Documents/d")
    try box.setxattr("Documents/d", "user.appbox.protection", ProtectionClass.none.name)
    box.release(try box.create("Documents/d/file"))
    try box.expectExactBooks()
  }
}
