import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// docs/reference.md's Data Protection table, cell by cell: every operation (create, open,
/// O_TRUNC, truncate, handle I/O, copy, metadata) on files of one class in one state.
/// Each cell is its own test: its expectations differ from its neighbours'.
@Suite("Data Protection table through the protocol")
struct ProtectionTableTests {
  // MARK: Class A (complete)

  @Test("class A in BFU: create, open and handle I/O refused; metadata allowed")
  func aBFU() throws { try ProtectionTable.check(.A, .bfu) }

  @Test("class A UNLOCKED: everything allowed")
  func aUnlocked() throws { try ProtectionTable.check(.A, .unlocked) }

  @Test("class A in GRACE: everything still allowed")
  func aGrace() throws { try ProtectionTable.check(.A, .grace) }

  @Test("class A LOCKED: create, open, O_TRUNC, truncate and I/O on earlier handles refused; metadata allowed")
  func aLocked() throws { try ProtectionTable.check(.A, .locked) }

  @Test("class A LOCKED after the CX timeout: as LOCKED")
  func aLockedCXExpired() throws { try ProtectionTable.check(.A, .lockedCXExpired) }

  // MARK: Class B (completeUnlessOpen)

  @Test("class B in BFU: open refused; create allowed")
  func bBFU() throws { try ProtectionTable.check(.B, .bfu) }

  @Test("class B UNLOCKED: everything allowed")
  func bUnlocked() throws { try ProtectionTable.check(.B, .unlocked) }

  @Test("class B in GRACE: everything allowed")
  func bGrace() throws { try ProtectionTable.check(.B, .grace) }

  @Test("class B LOCKED: open refused; create and I/O on earlier handles allowed")
  func bLocked() throws { try ProtectionTable.check(.B, .locked) }

  @Test("class B LOCKED after the CX timeout: as LOCKED")
  func bLockedCXExpired() throws { try ProtectionTable.check(.B, .lockedCXExpired) }

  // MARK: Class C (completeUntilFirstUserAuthentication)

  @Test("class C in BFU: create and open refused")
  func cBFU() throws { try ProtectionTable.check(.C, .bfu) }

  @Test("class C UNLOCKED: everything allowed")
  func cUnlocked() throws { try ProtectionTable.check(.C, .unlocked) }

  @Test("class C in GRACE: everything allowed")
  func cGrace() throws { try ProtectionTable.check(.C, .grace) }

  @Test("class C LOCKED: everything allowed (the first unlock happened)")
  func cLocked() throws { try ProtectionTable.check(.C, .locked) }

  @Test("class C LOCKED after the CX timeout: still allowed")
  func cLockedCXExpired() throws { try ProtectionTable.check(.C, .lockedCXExpired) }

  // MARK: Class CX (completeWhenUserInactive)

  @Test("class CX in BFU: create and open refused")
  func cxBFU() throws { try ProtectionTable.check(.CX, .bfu) }

  @Test("class CX UNLOCKED: everything allowed")
  func cxUnlocked() throws { try ProtectionTable.check(.CX, .unlocked) }

  @Test("class CX in GRACE: everything allowed")
  func cxGrace() throws { try ProtectionTable.check(.CX, .grace) }

  @Test("class CX LOCKED before its timeout: everything allowed, as C")
  func cxLocked() throws { try ProtectionTable.check(.CX, .locked) }

  @Test("class CX LOCKED after its timeout: as A, I/O on earlier handles refused too")
  func cxLockedCXExpired() throws { try ProtectionTable.check(.CX, .lockedCXExpired) }

  // MARK: Class D (none)

  @Test("class D in BFU: everything allowed")
  func dBFU() throws { try ProtectionTable.check(.D, .bfu) }

  @Test("class D UNLOCKED: everything allowed")
  func dUnlocked() throws { try ProtectionTable.check(.D, .unlocked) }

  @Test("class D in GRACE: everything allowed")
  func dGrace() throws { try ProtectionTable.check(.D, .grace) }

  @Test("class D LOCKED: everything allowed")
  func dLocked() throws { try ProtectionTable.check(.D, .locked) }

  @Test("class D LOCKED after the CX timeout: everything allowed")
  func dLockedCXExpired() throws { try ProtectionTable.check(.D, .lockedCXExpired) }
}

/// Class B's handles, and the state's changes over time.
@Suite("Data Protection handles and transitions through the protocol")
struct ProtectionTransitionTests {
  /// A sandbox with a directory `Documents/d` of `protectionClass`.
  static func sandbox(
    _ protectionClass: TestClass, _ configure: (inout SandboxOptions) -> Void = { _ in }
  ) throws -> Sandbox {
    let box = try Sandbox(configure)
    try box.mkdir("Documents/d")
    try box.protect("Documents/d", protectionClass.name)
    return box
  }

  @Test("class B: a file created while LOCKED is usable until closed; a handle from before the lock keeps working")
  func bCreatedWhileLocked() throws {
    let box = try Self.sandbox(.B)
    try box.writeFile("Documents/d/old", bytes("before"))
    #expect(try box.protection("Documents/d/old") == TestClass.B.name)
    let old = try box.open("Documents/d/old", flags: O_RDWR)
    #expect(box.fs.lock() == .locked)

    #expect(try box.read(old, count: 6) == bytes("before"))
    #expect(try box.write(old, bytes("locked"), at: 6) == 6)
    #expect(try box.read(old, count: 12) == bytes("beforelocked"))
    try box.truncate(old, to: 10)
    #expect(throws: Errno.notPermitted) { try box.open("Documents/d/old") }

    let new = try box.create("Documents/d/new")
    #expect(try box.protection("Documents/d/new") == TestClass.B.name)
    #expect(try box.write(new, bytes("written while locked")) == 20)
    #expect(try box.read(new, count: 64) == bytes("written while locked"))
    try box.truncate(new, to: 7)
    try box.fsync(new)
    #expect(try box.fs.getattr(Sandbox.root, node: new.node, handle: new.handle).st_size == 7)
    box.release(new)
    // Closed: an existing class-B file while LOCKED.
    #expect(throws: Errno.notPermitted) { try box.open("Documents/d/new") }
    #expect(throws: Errno.notPermitted) { try box.open("Documents/d/new", flags: O_WRONLY | O_APPEND) }
    #expect(throws: Errno.notPermitted) { try box.create("Documents/d/new", flags: O_RDWR) }
    _ = try box.getattr("Documents/d/new")  // metadata still works

    #expect(box.fs.unlock() == .unlocked)
    #expect(try box.contents("Documents/d/new") == bytes("written"))
    #expect(try box.contents("Documents/d/old") == bytes("beforelock"))
    box.release(old)
    try box.expectExactBooks()
  }

  @Test("class B in BFU: a file can be created and used until closed; the first unlock opens it")
  func bCreatedInBFU() throws {
    let box = try Sandbox({ $0.startUnlocked = false }) { backing in
      try Sys.mkdir(backing + "/Documents", 0o755)
      try Sys.mkdir(backing + "/Documents/b", 0o755)
      try ProtectionTable.classify(backing + "/Documents/b", .B)
    }
    #expect(box.fs.deviceState == .bfu)
    let file = try box.create("Documents/b/new")
    #expect(try box.write(file, bytes("bfu data")) == 8)
    #expect(try box.read(file, count: 64) == bytes("bfu data"))
    box.release(file)
    #expect(throws: Errno.notPermitted) { try box.open("Documents/b/new") }
    #expect(box.fs.unlock() == .unlocked)
    #expect(try box.contents("Documents/b/new") == bytes("bfu data"))
  }

  @Test("class B: the unlock lets a handle opened while UNLOCKED, and one created while LOCKED, go on alike")
  func bHandlesAcrossUnlock() throws {
    let box = try Self.sandbox(.B)
    #expect(box.fs.lock() == .locked)
    let created = try box.create("Documents/d/f")
    #expect(box.fs.unlock() == .unlocked)
    #expect(try box.write(created, bytes("x")) == 1)
    let again = try box.open("Documents/d/f")
    #expect(box.fs.lock() == .locked)
    #expect(try box.read(again, count: 1) == bytes("x"))
    box.release(again)
    box.release(created)
  }

  @Test("the end of grace closes class A: refused from then on, its cached pages dropped, the change logged")
  func graceEnds() throws {
    let box = try Self.sandbox(.A) { $0.gracePeriod = 0.2 }
    try box.writeFile("Documents/d/a", bytes("secret"))
    let held = try box.open("Documents/d/a")
    #expect(box.fs.lock() == .grace)
    #expect(try box.read(held, count: 6) == bytes("secret"), "GRACE: still open")
    #expect(box.eventually { box.fs.deviceState == .locked }, "grace ends by itself")
    #expect(throws: Errno.notPermitted) { try box.read(held, count: 6) }
    #expect(throws: Errno.notPermitted) { try box.open("Documents/d/a") }
    #expect(box.notifier.calls.contains(.invalidateInode(held.node)), "the kernel drops the file's pages")
    let states = box.eventObjects("state").map { "\($0["from"] as? String ?? "?")>\($0["to"] as? String ?? "?")" }
    #expect(states == ["UNLOCKED>GRACE", "GRACE>LOCKED"])
    box.release(held)
  }

  @Test("class CX closes at its inactivity timeout, and its pages are dropped then; an unlock opens it again")
  func inactivityTimeout() throws {
    let box = try Self.sandbox(.CX) { $0.inactivityTimeout = 0.2 }
    try box.writeFile("Documents/d/x", bytes("cx"))
    let held = try box.open("Documents/d/x")
    #expect(box.fs.lock() == .locked)
    #expect(try box.read(held, count: 2) == bytes("cx"), "as C before the timeout")
    #expect(!box.notifier.calls.contains(.invalidateInode(held.node)), "nothing closed at the lock")
    #expect(box.eventually { box.fs.protection.snapshot.cxExpired })
    #expect(box.eventually { box.notifier.calls.contains(.invalidateInode(held.node)) })
    #expect(throws: Errno.notPermitted) { try box.read(held, count: 2) }
    #expect(TestFiles.jsonObject(box.fs.statusJSON())?["cxExpired"] as? Bool == true)
    #expect(box.fs.unlock() == .unlocked)
    #expect(!box.fs.protection.snapshot.cxExpired)
    #expect(try box.read(held, count: 2) == bytes("cx"))
    box.release(held)
  }

  @Test("a lock drops the cached pages of class-A files only; the unlock lets old handles read again")
  func lockInvalidatesClosedClassesOnly() throws {
    let box = try Sandbox()
    for (directory, protectionClass) in [("a", TestClass.A), ("c", .C), ("d", .D), ("b", .B)] {
      try box.mkdir("Documents/" + directory)
      try box.protect("Documents/" + directory, protectionClass.name)
      try box.writeFile("Documents/\(directory)/f", bytes(directory))
    }
    let handles = try ["a", "b", "c", "d"].map { try box.open("Documents/\($0)/f") }
    #expect(box.fs.lock() == .locked)
    let invalidated = Set(box.notifier.calls.compactMap { if case .invalidateInode(let n) = $0 { n } else { nil } })
    #expect(invalidated == [handles[0].node])
    #expect(throws: Errno.notPermitted) { try box.read(handles[0], count: 1) }
    for handle in handles.dropFirst() { #expect(try box.read(handle, count: 1).count == 1) }
    #expect(box.fs.unlock() == .unlocked)
    #expect(try box.read(handles[0], count: 1) == bytes("a"))
    #expect(box.fs.lock() == .locked, "a second lock closes it again")
    #expect(throws: Errno.notPermitted) { try box.read(handles[0], count: 1) }
    for handle in handles { box.release(handle) }
  }

  @Test("lock and unlock are idempotent: a second lock keeps the grace counting, a second unlock changes nothing")
  func repeatedChanges() throws {
    let box = try Sandbox { $0.gracePeriod = 600 }
    #expect(box.fs.lock() == .grace)
    #expect(box.fs.lock() == .grace)
    #expect(box.fs.unlock() == .unlocked)
    #expect(box.fs.unlock() == .unlocked)
    let states = box.eventObjects("state").map { "\($0["from"] as? String ?? "?")>\($0["to"] as? String ?? "?")" }
    #expect(states == ["UNLOCKED>GRACE", "GRACE>UNLOCKED"], "only changes are events")
  }

  @Test("in BFU a lock changes nothing; the first unlock opens C, and a later lock leaves it open")
  func firstUnlock() throws {
    let box = try Sandbox({ $0.startUnlocked = false }) { backing in
      try Sys.mkdir(backing + "/Documents", 0o755)
      try TestFiles.write(backing + "/Documents/c", bytes("c"))
    }
    #expect(box.fs.lock() == .bfu)
    #expect(throws: Errno.notPermitted) { try box.open("Documents/c") }
    #expect(box.fs.unlock() == .unlocked)
    #expect(box.fs.lock() == .locked)
    box.release(try box.open("Documents/c"))
    let states = box.eventObjects("state").map { "\($0["from"] as? String ?? "?")>\($0["to"] as? String ?? "?")" }
    #expect(states == ["BFU>UNLOCKED", "UNLOCKED>LOCKED"])
  }

  @Test("a refusal in BFU is logged with the state BFU, the path, the class and the operation")
  func bfuRefusalEvent() throws {
    let box = try Sandbox({ $0.startUnlocked = false }) { backing in
      try Sys.mkdir(backing + "/Documents", 0o755)
      try TestFiles.write(backing + "/Documents/c", bytes("c"))
    }
    #expect(throws: Errno.notPermitted) { try box.open("Documents/c") }
    let refusal = try #require(box.eventObjects("refusal").first)
    #expect(refusal["path"] as? String == "Documents/c")
    #expect(refusal["class"] as? String == "completeUntilFirstUserAuthentication")
    #expect(refusal["state"] as? String == "BFU")
    #expect(refusal["operation"] as? String == "openExisting")
  }

  @Test("status counts refusals by class and operation; events log each refusal and state change, in order")
  func refusalsCountedAndLogged() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/a")
    try box.protect("Documents/a", "complete")
    try box.writeFile("Documents/a/file", bytes("a"))
    try box.writeFile("Documents/b", bytes("b"))
    try box.protect("Documents/b", "B")
    #expect(TestFiles.number(box.status, "refusals.total") == 0)
    #expect(box.fs.lock() == .locked)
    #expect(throws: Errno.notPermitted) { try box.open("Documents/a/file") }
    #expect(throws: Errno.notPermitted) { try box.open("Documents/a/file", flags: O_RDWR) }
    #expect(throws: Errno.notPermitted) { try box.create("Documents/a/new", flags: O_WRONLY | O_EXCL) }
    #expect(throws: Errno.notPermitted) { try box.open("Documents/b") }
    _ = try box.getattr("Documents/a/file")  // metadata is never refused, so never counted

    let status = box.status
    #expect(status["state"] as? String == "LOCKED")
    let refusals = try #require(status["refusals"] as? [String: Any])
    #expect(TestFiles.number(refusals, "total") == 4)
    #expect(TestFiles.number(refusals, "byClass.complete") == 3)
    #expect(TestFiles.number(refusals, "byClass.completeUnlessOpen") == 1)
    #expect(TestFiles.number(refusals, "byClass.none") == 0)
    #expect(TestFiles.number(refusals, "byOperation.openExisting") == 3)
    #expect(TestFiles.number(refusals, "byOperation.createNew") == 1)
    #expect(TestFiles.number(refusals, "byOperation.handleIO") == 0)

    #expect(box.fs.unlock() == .unlocked)
    // The second open of Documents/a/file repeats the first: coalesced, it is written as
    // an event of its own at the end of its window (here, the flush), timed at its refusal.
    let events = box.eventObjects("refusal").sorted { ($0["time"] as? Double ?? 0) < ($1["time"] as? Double ?? 0) }
    #expect(events.map { ($0["count"] as? Int) ?? 1 } == [1, 1, 1, 1])
    #expect(
      events.map { $0["path"] as? String } == [
        "Documents/a/file", "Documents/a/file", "Documents/a/new", "Documents/b",
      ])
    #expect(events.map { $0["class"] as? String } == ["complete", "complete", "complete", "completeUnlessOpen"])
    #expect(events.map { $0["operation"] as? String } == ["openExisting", "openExisting", "createNew", "openExisting"])
    #expect(events.allSatisfy { $0["state"] as? String == "LOCKED" && $0["time"] is Double })
    let states = box.eventObjects("state").map { "\($0["from"] as? String ?? "?")>\($0["to"] as? String ?? "?")" }
    #expect(states == ["UNLOCKED>LOCKED", "LOCKED>UNLOCKED"])
  }
}
