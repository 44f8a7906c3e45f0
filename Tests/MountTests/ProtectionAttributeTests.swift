import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Protection classes: the attribute, inheritance, persistence", .needsFUSE, .timeLimit(.minutes(10)))
struct ProtectionAttributeTests {
  static let fixedDirectories = [
    "Documents", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp",
  ]

  /// Backing value of the class attribute.
  /// The class a backing file carries: set by a program, else given at creation (kept
  /// under an internal name that the mount does not list), else none, which is the
  /// container default (these fixtures keep it at completeUntilFirstUserAuthentication).
  func backingClass(_ path: String) -> String? {
    guard access(path, F_OK) == 0 else { return nil }
    return (try? Sys2.getxattr(path, ProtectionAttribute.protection).get())
      ?? (try? Sys2.getxattr(path, "user.appbox.inherited-protection").get()) ?? TestClass.C.name
  }

  @Test("without configuration new items are completeUntilFirstUserAuthentication, in every fixed directory")
  func containerDefault() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let c = TestClass.C.name
    for directory in Self.fixedDirectories {
      #expect(Sys2.protection(fixture.path(directory)) == c, "\(directory)")
      try Data("x".utf8).write(to: URL(fileURLWithPath: fixture.path(directory + "/file")))
      #expect(mkdir(fixture.path(directory + "/dir"), 0o755) == 0)
      #expect(Sys2.protection(fixture.path(directory + "/file")) == c, "\(directory)/file")
      #expect(Sys2.protection(fixture.path(directory + "/dir")) == c, "\(directory)/dir")
      #expect(backingClass(fixture.backingPath(directory + "/file")) == c, "stored on the backing file")
    }
    try fixture.unmount()
  }

  @Test(
    "--default-protection sets the class of new items",
    arguments: [
      ("complete", "complete"), ("B", "completeUnlessOpen"), ("NSFileProtectionNone", "none"),
      ("7", "completeWhenUserInactive"),
      ("completeUntilFirstUserAuthentication", "completeUntilFirstUserAuthentication"),
    ])
  func configuredDefault(spelling: String, canonical: String) throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--default-protection", spelling])
    for directory in ["Documents", "Library/Caches"] {
      let file = fixture.path(directory + "/file")
      try Data("x".utf8).write(to: URL(fileURLWithPath: file))
      #expect(Sys2.protection(file) == canonical)
      #expect(mkdir(fixture.path(directory + "/dir"), 0o755) == 0)
      #expect(Sys2.protection(fixture.path(directory + "/dir")) == canonical)
    }
    try fixture.unmount()
  }

  @Test("a directory's class goes to new files and new subdirectories, recursively", arguments: TestClass.allCases)
  func inheritance(protectionClass: TestClass) throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let top = fixture.path("Library/Application Support/top")
    #expect(mkdir(top, 0o755) == 0)
    #expect(Sys2.setxattr(top, ProtectionAttribute.protection, protectionClass.name) == 0)
    #expect(backingClass(fixture.backingPath("Library/Application Support/top")) == protectionClass.name)
    try Data("x".utf8).write(to: URL(fileURLWithPath: top + "/file"))
    #expect(mkdir(top + "/sub", 0o755) == 0)
    #expect(mknod(top + "/node", S_IFREG | 0o644, 0) == 0)
    try Data("y".utf8).write(to: URL(fileURLWithPath: top + "/sub/deeper"))
    for name in ["file", "sub", "node", "sub/deeper"] {
      #expect(Sys2.protection(top + "/" + name) == protectionClass.name, "\(name)")
      #expect(
        backingClass(fixture.backingPath("Library/Application Support/top/" + name)) == protectionClass.name,
        "backing \(name)")
    }
    // A sibling directory is unaffected.
    #expect(mkdir(fixture.path("Library/Application Support/other"), 0o755) == 0)
    #expect(Sys2.protection(fixture.path("Library/Application Support/other")) == TestClass.C.name)
    try fixture.unmount()
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
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let file = fixture.path("Documents/f")
    try Data("x".utf8).write(to: URL(fileURLWithPath: file))
    #expect(Sys2.setxattr(file, ProtectionAttribute.protection, spelling) == 0)
    #expect(Sys2.protection(file) == canonical)
    #expect(backingClass(fixture.backingPath("Documents/f")) == canonical, "the backing keeps the canonical name")
    try fixture.unmount()
  }

  @Test("anything else is EINVAL and changes nothing")
  func invalidValues() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let file = fixture.path("Documents/f")
    try Data("x".utf8).write(to: URL(fileURLWithPath: file))
    #expect(Sys2.setxattr(file, ProtectionAttribute.protection, "complete") == 0)
    for value in [
      "", "E", "5", "0", "8", "AB", "CY", "bogus", "completeUnless", "complete!", "NSFileProtection",
      "NSFileProtectionBogus", " complete", "complete complete",
    ] {
      #expect(Sys2.setxattr(file, ProtectionAttribute.protection, value) == EINVAL, "value '\(value)'")
    }
    #expect(Sys2.protection(file) == "complete")
    #expect(backingClass(fixture.backingPath("Documents/f")) == "complete")
    try fixture.unmount()
  }

  @Test("the device state is a read-only attribute of the root")
  func deviceStateReadOnly() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    #expect(fixture.deviceState == "UNLOCKED")
    #expect(Sys2.setxattr(fixture.mountpoint, ProtectionAttribute.deviceState, "LOCKED") == EPERM)
    #expect(Sys2.setxattr(fixture.mountpoint, ProtectionAttribute.deviceState, "UNLOCKED") == EPERM)
    #expect(fixture.deviceState == "UNLOCKED")
    try fixture.unmount()
  }

  @Test("changing a class while LOCKED needs the current class to be accessible")
  func changeWhileLocked() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0", "--cx-timeout", "10m"])
    for protectionClass in TestClass.allCases {
      let file = fixture.path("Documents/\(protectionClass.rawValue)")
      try Data("x".utf8).write(to: URL(fileURLWithPath: file))
      #expect(Sys2.setxattr(file, ProtectionAttribute.protection, protectionClass.name) == 0)
    }
    try Data("x".utf8).write(to: URL(fileURLWithPath: fixture.path("Documents/cli")))  // class C
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    // From C, CX (before its timeout) and D: allowed to a class open now, never to A or B
    // (as Apple's filesystems answer: EPERM, class unchanged).
    for from in [TestClass.C, .CX, .D] {
      let file = fixture.path("Documents/\(from.rawValue)")
      for closed in ["complete", "completeUnlessOpen"] {
        #expect(Sys2.setxattr(file, ProtectionAttribute.protection, closed) == EPERM, "from \(from) to \(closed)")
        #expect(Sys2.protection(file) == from.name, "from \(from) to \(closed)")
      }
      let open = from == .D ? "completeUntilFirstUserAuthentication" : "none"
      #expect(Sys2.setxattr(file, ProtectionAttribute.protection, open) == 0, "from \(from) to \(open)")
      #expect(Sys2.protection(file) == open, "from \(from) to \(open)")
    }
    // From A and B (open existing refused while LOCKED): EPERM, class unchanged.
    for from in [TestClass.A, .B] {
      let file = fixture.path("Documents/\(from.rawValue)")
      #expect(Sys2.setxattr(file, ProtectionAttribute.protection, "none") == EPERM, "from \(from)")
      #expect(Sys2.protection(file) == from.name, "from \(from)")
      #expect(backingClass(fixture.backingPath("Documents/\(from.rawValue)")) == from.name)
    }
    // Removing the attribute is a change of class too.
    #expect(Outcome(Sys2.removexattr(fixture.path("Documents/A"), ProtectionAttribute.protection)) == .eperm)
    #expect(Sys2.protection(fixture.path("Documents/A")) == "complete")
    // The CLI says so with its documented exit code.
    let refused = try Command.run(Command.appbox, ["protect", fixture.path("Documents/A"), "--class", "none"])
    #expect(refused.status == 1, "appbox protect exited \(refused.status): \(refused.error)")
    let allowed = try Command.run(Command.appbox, ["protect", fixture.path("Documents/cli"), "--class", "D"])
    #expect(allowed.status == 0, "appbox protect exited \(allowed.status): \(allowed.error)")
    #expect(Sys2.protection(fixture.path("Documents/cli")) == "none")

    try fixture.control("unlock")
    #expect(Sys2.setxattr(fixture.path("Documents/A"), ProtectionAttribute.protection, "none") == 0)
    try fixture.unmount()
  }

  @Test("before first unlock: a directory's class changes (a folder for background work), a file's only to D")
  func changeBeforeFirstUnlock() throws {
    let fixture = try MountFixture(arguments: ["--bfu", "--grace", "0"])
    #expect(fixture.deviceState == "BFU")
    let folder = fixture.path("Documents/bg")
    #expect(mkdir(folder, 0o755) == 0)
    #expect(Sys2.setxattr(folder, ProtectionAttribute.protection, "none") == 0)
    #expect(Sys2.protection(folder) == "none")
    let file = folder + "/downloaded"
    try Data("early".utf8).write(to: URL(fileURLWithPath: file))  // class D: allowed in BFU
    #expect(Sys2.protection(file) == "none")
    for closed in ["completeUntilFirstUserAuthentication", "complete", "completeWhenUserInactive"] {
      #expect(Sys2.setxattr(file, ProtectionAttribute.protection, closed) == EPERM, "D to \(closed) in BFU")
      #expect(Sys2.protection(file) == "none")
    }
    // A class-A directory while LOCKED: its class changes too.
    try fixture.control("unlock")
    let vault = fixture.path("Documents/vault")
    #expect(mkdir(vault, 0o755) == 0)
    #expect(Sys2.setxattr(vault, ProtectionAttribute.protection, "complete") == 0)
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    #expect(Sys2.setxattr(vault, ProtectionAttribute.protection, "none") == 0)
    #expect(Sys2.protection(vault) == "none")
    try fixture.unmount()
  }

  @Test("a file keeps the class it was created with when the sandbox is mounted again with another default")
  func remountWithAnotherDefault() throws {
    let sandbox = try BackingMount()
    try sandbox.mount(["--unlocked"])
    try Data("c".utf8).write(to: URL(fileURLWithPath: sandbox.path("Documents/a")))
    #expect(mkdir(sandbox.path("Documents/d"), 0o755) == 0)
    try Data("c".utf8).write(to: URL(fileURLWithPath: sandbox.path("Documents/d/b")))
    try sandbox.unmount()

    try sandbox.mount(["--unlocked", "--default-protection", "none"])
    let classC = TestClass.C.name
    for item in ["Documents/a", "Documents/d", "Documents/d/b"] {
      #expect(Sys2.protection(sandbox.path(item)) == classC, "\(item) after a remount with default none")
    }
    try Data("d".utf8).write(to: URL(fileURLWithPath: sandbox.path("Documents/n")))
    try Data("c".utf8).write(to: URL(fileURLWithPath: sandbox.path("Documents/d/m")))
    #expect(Sys2.protection(sandbox.path("Documents/n")) == "none")
    #expect(Sys2.protection(sandbox.path("Documents/d/m")) == classC, "a new file takes its directory's class")
    let rootNames = try listXattr(sandbox.mountpoint).map { String(decoding: $0, as: UTF8.self) }
    #expect(!rootNames.contains { $0.hasPrefix("user.appbox.default") }, "\(rootNames)")
    try sandbox.unmount()

    try sandbox.mount(["--unlocked"])
    #expect(Sys2.protection(sandbox.path("Documents/n")) == "none", "a file made under default none keeps it")
    #expect(Sys2.protection(sandbox.path("Documents/a")) == classC)
    try sandbox.unmount()
  }

  @Test("a class survives rename (also across domains) and remount")
  func survivesRenameAndRemount() throws {
    let sandbox = try BackingMount()
    try sandbox.mount(["--unlocked"])
    let secret = sandbox.path("Documents/secret")
    try Data("kept".utf8).write(to: URL(fileURLWithPath: secret))
    #expect(Sys2.setxattr(secret, ProtectionAttribute.protection, "A") == 0)
    #expect(Glibc.rename(secret, sandbox.path("Documents/renamed")) == 0)
    #expect(Sys2.protection(sandbox.path("Documents/renamed")) == "complete")
    let moved = "Library/Application Support/moved"
    #expect(Glibc.rename(sandbox.path("Documents/renamed"), sandbox.path(moved)) == 0)
    #expect(Sys2.protection(sandbox.path(moved)) == "complete")
    #expect(mkdir(sandbox.path("Documents/dir"), 0o755) == 0)
    #expect(Sys2.setxattr(sandbox.path("Documents/dir"), ProtectionAttribute.protection, "none") == 0)
    #expect(Glibc.rename(sandbox.path("Documents/dir"), sandbox.path("Documents/dir2")) == 0)
    try sandbox.unmount()
    #expect(backingClass(sandbox.backingPath(moved)) == "complete")

    // Mounted again (BFU): the class is still A, readable as metadata, its content refused.
    try sandbox.mount(["--bfu"])
    #expect(Sys2.protection(sandbox.path(moved)) == "complete")
    #expect(Sys2.tryOpen(sandbox.path(moved), O_RDONLY) == .eperm)
    // The D directory's new files are D, so usable in BFU.
    let (fd, created) = Sys2.open(sandbox.path("Documents/dir2/new"), O_CREAT | O_EXCL | O_RDWR)
    #expect(created == .ok)
    if fd >= 0 { close(fd) }
    #expect(Sys2.protection(sandbox.path("Documents/dir2/new")) == "none")
    let result = try Command.run(Command.appbox, ["unlock", sandbox.mountpoint])
    #expect(result.status == 0)
    #expect(try String(contentsOfFile: sandbox.path(moved), encoding: .utf8) == "kept")
    try sandbox.unmount()
  }
}
