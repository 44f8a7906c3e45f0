import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// The class attribute: spellings, inheritance, the container default, changes of class
/// by state, and what the backing tree keeps across remounts.
@Suite("Protection classes: the attribute, inheritance, persistence, through the protocol")
struct ProtectionAttributeTests {
  static let fixedDirectories = [
    "Documents", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp",
  ]
  static let c = TestClass.C.name

  /// The class a backing item stores: one a program set, else the one it was given at
  /// creation (internal name), else none (it has the container default).
  static func stored(_ box: Sandbox, _ path: String) -> String? {
    (box.backingXattr(path, AppBoxAttribute.protection.name)
      ?? box.backingXattr(path, AppBoxAttribute.inheritedProtectionName)).map { String(decoding: $0, as: UTF8.self) }
  }

  @Test("without configuration new items are completeUntilFirstUserAuthentication, in every fixed directory")
  func containerDefault() throws {
    let box = try Sandbox()
    for directory in Self.fixedDirectories {
      #expect(try box.protection(directory) == Self.c, "\(directory)")
      try box.writeFile(directory + "/file", bytes("x"))
      try box.mkdir(directory + "/dir")
      #expect(try box.protection(directory + "/file") == Self.c, "\(directory)/file")
      #expect(try box.protection(directory + "/dir") == Self.c, "\(directory)/dir")
      #expect(Self.stored(box, directory + "/file") == nil, "the default is not stored (one write less per create)")
    }
    #expect(
      box.backingXattr("", DefaultProtection.attributeName) == bytes(Self.c), "the backing root records the default")
  }

  @Test(
    "--default-protection sets the class of new items",
    arguments: [
      ("complete", "complete"), ("B", "completeUnlessOpen"), ("NSFileProtectionNone", "none"),
      ("7", "completeWhenUserInactive"),
      ("completeUntilFirstUserAuthentication", "completeUntilFirstUserAuthentication"),
    ])
  func configuredDefault(spelling: String, canonical: String) throws {
    let configured = try #require(ProtectionClass(parsing: Array(spelling.utf8)))
    let box = try Sandbox { $0.defaultProtection = configured }
    for directory in ["Documents", "Library/Caches"] {
      try box.writeFile(directory + "/file", bytes("x"))
      #expect(try box.protection(directory + "/file") == canonical)
      try box.mkdir(directory + "/dir")
      #expect(try box.protection(directory + "/dir") == canonical)
    }
  }

  @Test("a directory's class goes to new files, nodes and subdirectories, recursively", arguments: TestClass.allCases)
  func inheritance(protectionClass: TestClass) throws {
    let box = try Sandbox()
    let top = "Library/Application Support/top"
    try box.mkdir(top)
    try box.protect(top, protectionClass.name)
    #expect(Self.stored(box, top) == protectionClass.name)
    try box.writeFile(top + "/file", bytes("x"))
    try box.mkdir(top + "/sub")
    try box.mknod(top + "/node", mode: S_IFREG | 0o644)
    try box.writeFile(top + "/sub/deeper", bytes("y"))
    for name in ["file", "sub", "node", "sub/deeper"] {
      #expect(try box.protection(top + "/" + name) == protectionClass.name, "\(name)")
      let expectedStored = protectionClass == .C ? nil : protectionClass.name
      #expect(Self.stored(box, top + "/" + name) == expectedStored, "backing \(name)")
    }
    try box.mkdir("Library/Application Support/other")
    #expect(try box.protection("Library/Application Support/other") == Self.c, "a sibling is unaffected")
  }

  @Test(
    "every accepted spelling reads back as the canonical name",
    arguments: [
      ("complete", "complete"), ("NSFileProtectionComplete", "complete"), ("A", "complete"), ("1", "complete"),
      ("completeUnlessOpen", "completeUnlessOpen"), ("NSFileProtectionCompleteUnlessOpen", "completeUnlessOpen"),
      ("B", "completeUnlessOpen"), ("2", "completeUnlessOpen"),
      ("completeUntilFirstUserAuthentication", "completeUntilFirstUserAuthentication"),
      ("NSFileProtectionCompleteUntilFirstUserAuthentication", "completeUntilFirstUserAuthentication"),
      ("C", "completeUntilFirstUserAuthentication"), ("3", "completeUntilFirstUserAuthentication"),
      ("completeWhenUserInactive", "completeWhenUserInactive"),
      ("NSFileProtectionCompleteWhenUserInactive", "completeWhenUserInactive"),
      ("CX", "completeWhenUserInactive"), ("7", "completeWhenUserInactive"),
      ("none", "none"), ("NSFileProtectionNone", "none"), ("D", "none"), ("4", "none"),
    ])
  func spellings(spelling: String, canonical: String) throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", bytes("x"))
    try box.protect("Documents/f", spelling)
    #expect(try box.protection("Documents/f") == canonical)
    #expect(Self.stored(box, "Documents/f") == canonical, "the backing keeps the canonical name")
  }

  @Test("anything else is EINVAL and changes nothing")
  func invalidValues() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", bytes("x"))
    try box.protect("Documents/f", "complete")
    for value in [
      "", "E", "5", "0", "8", "AB", "CY", "bogus", "completeUnless", "complete!", "NSFileProtection",
      "NSFileProtectionBogus", " complete", "complete complete",
    ] {
      #expect(throws: Errno.invalidArgument, "value '\(value)'") { try box.protect("Documents/f", value) }
    }
    #expect(throws: Errno.invalidArgument) {
      try box.setxattr("Documents/f", AppBoxAttribute.protection.name, bytes: [0x63, 0xFF, 0x00])
    }
    #expect(try box.protection("Documents/f") == "complete")
    #expect(Self.stored(box, "Documents/f") == "complete")
  }

  @Test("a symlink, a FIFO and a socket take no class (EPERM); they read back their directory's")
  func onlyFilesAndDirectories() throws {
    let box = try Sandbox()
    try box.symlink("target", at: "Documents/link")
    try box.mknod("Documents/fifo", mode: S_IFIFO | 0o644)
    try box.mknod("Documents/socket", mode: S_IFSOCK | 0o644)
    for path in ["Documents/link", "Documents/fifo", "Documents/socket"] {
      #expect(throws: Errno.notPermitted, "\(path)") { try box.protect(path, "none") }
    }
  }

  @Test("the device state is a read-only attribute of the root; the capacity attributes too")
  func rootAttributesReadOnly() throws {
    let box = try Sandbox()
    #expect(try box.getxattr("", AppBoxAttribute.deviceState.name) == bytes("UNLOCKED"))
    for attribute in AppBoxAttribute.rootAttributes {
      #expect(throws: Errno.notPermitted, "\(attribute)") { try box.setxattr("", attribute.name, "LOCKED") }
      #expect(throws: Errno.notPermitted, "\(attribute)") { try box.removexattr("", attribute.name) }
      try box.writeFile("Documents/f", [])
      #expect(throws: Errno.noData, "only on the root") { try box.getxattr("Documents/f", attribute.name) }
    }
    #expect(try box.getxattr("", AppBoxAttribute.deviceState.name) == bytes("UNLOCKED"))
    #expect(box.fs.lock() == .locked)
    #expect(try box.getxattr("", AppBoxAttribute.deviceState.name) == bytes("LOCKED"))
    let listed = try box.xattrNames("")
    #expect(listed == Set(AppBoxAttribute.rootAttributes.map(\.name)), "and nothing internal: \(listed)")
  }

  @Test("changing a class while LOCKED needs the current and the new class to be accessible")
  func changeWhileLocked() throws {
    let box = try Sandbox { $0.inactivityTimeout = 600 }
    for protectionClass in TestClass.allCases {
      try box.writeFile("Documents/\(protectionClass.rawValue)", bytes("x"))
      try box.protect("Documents/\(protectionClass.rawValue)", protectionClass.name)
    }
    #expect(box.fs.lock() == .locked)
    // From C, CX (before its timeout) and D: allowed to a class open now, never to A or B.
    for from in [TestClass.C, .CX, .D] {
      let file = "Documents/\(from.rawValue)"
      for closed in ["complete", "completeUnlessOpen"] {
        #expect(throws: Errno.notPermitted, "from \(from) to \(closed)") { try box.protect(file, closed) }
        #expect(try box.protection(file) == from.name)
      }
      let open = from == .D ? "completeUntilFirstUserAuthentication" : "none"
      try box.protect(file, open)
      #expect(try box.protection(file) == open)
    }
    // From A and B (open existing refused while LOCKED): EPERM, class unchanged.
    for from in [TestClass.A, .B] {
      let file = "Documents/\(from.rawValue)"
      #expect(throws: Errno.notPermitted) { try box.protect(file, "none") }
      #expect(try box.protection(file) == from.name)
      #expect(Self.stored(box, file) == from.name)
    }
    // Removing the attribute is a change of class too.
    #expect(throws: Errno.notPermitted) { try box.removexattr("Documents/A", AppBoxAttribute.protection.name) }
    #expect(try box.protection("Documents/A") == "complete")
    let refusals = box.eventObjects("refusal")
    #expect(refusals.count == 9, "each refused change is a refusal: \(refusals.count)")
    #expect(box.fs.unlock() == .unlocked)
    try box.protect("Documents/A", "none")
    #expect(try box.protection("Documents/A") == "none")
  }

  @Test("in GRACE a file may still become class A; the end of grace then closes it")
  func changeInGrace() throws {
    let box = try Sandbox { $0.gracePeriod = 0.3 }
    try box.writeFile("Documents/f", bytes("x"))
    let held = try box.open("Documents/f")
    #expect(box.fs.lock() == .grace)
    try box.protect("Documents/f", "complete")
    #expect(try box.read(held, count: 1) == bytes("x"))
    #expect(box.eventually { box.fs.deviceState == .locked })
    #expect(throws: Errno.notPermitted) { try box.read(held, count: 1) }
    #expect(box.notifier.calls.contains(.invalidateInode(held.node)))
    box.release(held)
  }

  @Test("a file made class A while open: its handles are refused from the lock on, and its pages dropped then")
  func reclassifiedOpenFile() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", bytes("x"))
    let held = try box.open("Documents/f")
    try box.protect("Documents/f", "A")
    #expect(try box.read(held, count: 1) == bytes("x"), "UNLOCKED: open")
    #expect(box.fs.lock() == .locked)
    #expect(throws: Errno.notPermitted) { try box.read(held, count: 1) }
    #expect(box.notifier.calls.contains(.invalidateInode(held.node)))
    box.release(held)
  }

  @Test("removing a file's class gives it back the class it was created with, else the default")
  func removeFallsBack() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/d")
    try box.protect("Documents/d", "none")
    try box.writeFile("Documents/d/f", bytes("x"))
    try box.protect("Documents/d/f", "complete")
    #expect(try box.xattrNames("Documents/d/f") == [AppBoxAttribute.protection.name])
    try box.removexattr("Documents/d/f", AppBoxAttribute.protection.name)
    #expect(try box.protection("Documents/d/f") == "none", "the class it inherited")
    #expect(try box.xattrNames("Documents/d/f") == [], "the inherited class is not listed")
    try box.writeFile("Documents/g", bytes("x"))
    try box.protect("Documents/g", "complete")
    try box.removexattr("Documents/g", AppBoxAttribute.protection.name)
    #expect(try box.protection("Documents/g") == Self.c)
    #expect(throws: Errno.noData) { try box.removexattr("Documents/g", AppBoxAttribute.protection.name) }
  }

  @Test("a directory's new class is a default for new items: what it holds keeps its class")
  func directoryChangeAppliesToNewItems() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/d")
    try box.protect("Documents/d", "complete")
    try box.writeFile("Documents/d/old", bytes("x"))
    try box.protect("Documents/d", "none")
    try box.writeFile("Documents/d/new", bytes("x"))
    #expect(try box.protection("Documents/d/old") == "complete")
    #expect(try box.protection("Documents/d/new") == "none")
  }

  @Test("before first unlock: a directory's class changes (a folder for background work), a file's only to D")
  func changeBeforeFirstUnlock() throws {
    let box = try Sandbox { $0.startUnlocked = false }
    #expect(box.fs.deviceState == .bfu)
    try box.mkdir("Documents/bg")
    try box.protect("Documents/bg", "none")
    #expect(try box.protection("Documents/bg") == "none")
    try box.writeFile("Documents/bg/downloaded", bytes("early"))  // class D: allowed in BFU
    #expect(try box.protection("Documents/bg/downloaded") == "none")
    for closed in ["completeUntilFirstUserAuthentication", "complete", "completeWhenUserInactive"] {
      #expect(throws: Errno.notPermitted, "D to \(closed) in BFU") {
        try box.protect("Documents/bg/downloaded", closed)
      }
      #expect(try box.protection("Documents/bg/downloaded") == "none")
    }
    // A class-A directory while LOCKED: its class changes too.
    #expect(box.fs.unlock() == .unlocked)
    try box.mkdir("Documents/vault")
    try box.protect("Documents/vault", "complete")
    #expect(box.fs.lock() == .locked)
    try box.protect("Documents/vault", "none")
    #expect(try box.protection("Documents/vault") == "none")
  }

  @Test("a file keeps the class it was created with when the sandbox is mounted again with another default")
  func remountWithAnotherDefault() throws {
    let first = try Sandbox()
    try first.writeFile("Documents/a", bytes("c"))
    try first.mkdir("Documents/d")
    try first.writeFile("Documents/d/b", bytes("c"))

    let second = try first.remount { $0.defaultProtection = ProtectionClass.none }
    for item in ["Documents/a", "Documents/d", "Documents/d/b"] {
      #expect(try second.protection(item) == Self.c, "\(item) after a remount with default none")
    }
    try second.writeFile("Documents/n", bytes("d"))
    try second.writeFile("Documents/d/m", bytes("c"))
    #expect(try second.protection("Documents/n") == "none")
    #expect(try second.protection("Documents/d/m") == Self.c, "a new file takes its directory's class")
    #expect(try second.xattrNames("").allSatisfy { !$0.hasPrefix("user.appbox.default") })

    let third = try second.remount { $0.defaultProtection = .containerDefault }
    #expect(try third.protection("Documents/n") == "none", "a file made under default none keeps it")
    #expect(try third.protection("Documents/a") == Self.c)
  }

  @Test("a class survives rename (also across domains) and remount; in BFU after the remount it is refused")
  func survivesRenameAndRemount() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/secret", bytes("kept"))
    try box.protect("Documents/secret", "A")
    try box.rename("Documents/secret", to: "Documents/renamed")
    #expect(try box.protection("Documents/renamed") == "complete")
    let moved = "Library/Application Support/moved"
    try box.rename("Documents/renamed", to: moved)
    #expect(try box.protection(moved) == "complete")
    try box.mkdir("Documents/dir")
    try box.protect("Documents/dir", "none")
    try box.rename("Documents/dir", to: "Documents/dir2")
    #expect(Self.stored(box, moved) == "complete")

    let again = try box.remount { $0.startUnlocked = false }
    #expect(try again.protection(moved) == "complete")
    #expect(throws: Errno.notPermitted) { try again.open(moved) }
    let created = try again.create("Documents/dir2/new")  // the D directory's new files are D
    again.release(created)
    #expect(try again.protection("Documents/dir2/new") == "none")
    #expect(again.fs.unlock() == .unlocked)
    #expect(try again.contents(moved) == bytes("kept"))
  }
}
