import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A column of SPEC §2's table. `lockedCXExpired` is LOCKED after the
/// completeWhenUserInactive timeout ran out (the "then as A" of the CX row).
enum TableState: Int, CaseIterable, CustomTestStringConvertible, Sendable {
  case bfu, unlocked, grace, locked, lockedCXExpired

  var testDescription: String {
    switch self {
    case .bfu: "BFU"
    case .unlocked: "UNLOCKED"
    case .grace: "GRACE"
    case .locked: "LOCKED"
    case .lockedCXExpired: "LOCKED+cx-timeout"
    }
  }
}

/// A row of the table: what the test does.
enum TableOperation: String, CaseIterable, Sendable {
  // Handle I/O on a descriptor opened before the state was entered.
  case read, write, ftruncate, fallocate
  // Opening. The `Creat` variants open with O_CREAT but without O_EXCL, on names the
  // kernel has not looked up yet (it then sends CREATE even for an existing name).
  case openExisting, openExistingCreat, createNew, createNewCreat
  // Metadata.
  case stat, readdir, chmod, chown, utimes, getxattr, setxattr, rename, link, unlink

  /// Whether the operation works on the handle opened before the state was entered.
  var usesHeldHandle: Bool {
    switch self {
    case .read, .write, .ftruncate, .fallocate: true
    default: false
    }
  }

  var isMetadata: Bool {
    switch self {
    case .read, .write, .ftruncate, .fallocate, .openExisting, .openExistingCreat, .createNew, .createNewCreat: false
    default: true
    }
  }
}

@Suite("Data Protection table (SPEC §2)", .needsFUSE, .timeLimit(.minutes(10)))
struct ProtectionTableTests {
  private static let ok = Outcome.ok
  private static let eperm = Outcome.eperm

  /// SPEC §2, written out. Columns: BFU, UNLOCKED, GRACE, LOCKED, LOCKED after the CX
  /// timeout.
  static let expected: [TestClass: [TableOperation: [Outcome]]] = [
    .A: [
      .createNew: [eperm, ok, ok, eperm, eperm],
      .openExisting: [eperm, ok, ok, eperm, eperm],
      .read: [eperm, ok, ok, eperm, eperm],
      .write: [eperm, ok, ok, eperm, eperm],
      .ftruncate: [eperm, ok, ok, eperm, eperm],
      .fallocate: [eperm, ok, ok, eperm, eperm],
    ],
    .B: [
      .createNew: [ok, ok, ok, ok, ok],
      .openExisting: [eperm, ok, ok, eperm, eperm],
      .read: [ok, ok, ok, ok, ok],
      .write: [ok, ok, ok, ok, ok],
      .ftruncate: [ok, ok, ok, ok, ok],
      .fallocate: [ok, ok, ok, ok, ok],
    ],
    .C: [
      .createNew: [eperm, ok, ok, ok, ok],
      .openExisting: [eperm, ok, ok, ok, ok],
      .read: [eperm, ok, ok, ok, ok],
      .write: [eperm, ok, ok, ok, ok],
      .ftruncate: [eperm, ok, ok, ok, ok],
      .fallocate: [eperm, ok, ok, ok, ok],
    ],
    .CX: [
      .createNew: [eperm, ok, ok, ok, eperm],
      .openExisting: [eperm, ok, ok, ok, eperm],
      .read: [eperm, ok, ok, ok, eperm],
      .write: [eperm, ok, ok, ok, eperm],
      .ftruncate: [eperm, ok, ok, ok, eperm],
      .fallocate: [eperm, ok, ok, ok, eperm],
    ],
    .D: [
      .createNew: [ok, ok, ok, ok, ok],
      .openExisting: [ok, ok, ok, ok, ok],
      .read: [ok, ok, ok, ok, ok],
      .write: [ok, ok, ok, ok, ok],
      .ftruncate: [ok, ok, ok, ok, ok],
      .fallocate: [ok, ok, ok, ok, ok],
    ],
  ]

  /// Metadata, for every class: never refused.
  static let metadata: [Outcome] = [ok, ok, ok, ok, ok]

  static func expectation(_ protectionClass: TestClass, _ operation: TableOperation, _ state: TableState) -> Outcome {
    let row: [Outcome]
    switch operation {
    case _ where operation.isMetadata: row = metadata
    // An O_CREAT open of an existing name is an open of an existing file.
    case .openExistingCreat: row = expected[protectionClass]![.openExisting]!
    case .createNewCreat: row = expected[protectionClass]![.createNew]!
    default: row = expected[protectionClass]![operation]!
    }
    return row[state.rawValue]
  }

  /// One mount per (state, class): a directory `Documents/p` of the class holding
  /// `existing`, `held` (opened before the state is entered) and `meta`, all of the class.
  @Test("every operation in every state", arguments: TableState.allCases, TestClass.allCases)
  func table(state: TableState, protectionClass: TestClass) throws {
    let arguments: [String]
    switch state {
    case .bfu: arguments = ["--bfu"]
    case .unlocked: arguments = ["--unlocked"]
    case .grace: arguments = ["--unlocked", "--grace", "10m"]
    case .locked: arguments = ["--unlocked", "--grace", "0", "--cx-timeout", "10m"]
    case .lockedCXExpired: arguments = ["--unlocked", "--grace", "0", "--cx-timeout", "1s"]
    }
    let fixture = try MountFixture(arguments: arguments) { backing in
      let directory = backing + "/Documents/p"
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
      try Sys2.classify(directory, protectionClass)
      for name in ["existing", "existing2", "held", "meta"] {
        try Sys2.write(directory + "/" + name, "hello world, this is \(name)\n")
        // In BFU no handle of a closed class can be opened, and no file can be given a
        // class closed now: a held handle in BFU is always class D (B's, made by a create
        // in BFU, are in `createdInBFU`); AccessRuleTests covers the unreachable cells.
        try Sys2.classify(directory + "/" + name, state == .bfu && name == "held" ? .D : protectionClass)
      }
    }
    let p = fixture.path("Documents/p")

    // The handle opened before the state under test.
    let (held, heldOpen) = Sys2.open(p + "/held", O_RDWR)
    try #require(heldOpen == .ok, "opening held in the initial state: \(heldOpen)")

    switch state {
    case .bfu:
      #expect(fixture.deviceState == "BFU")
      // Giving the open D file a class closed now is refused, as on a device.
      let closedNow = protectionClass != .D
      #expect(
        Sys2.setxattr(p + "/held", ProtectionAttribute.protection, protectionClass.name) == (closedNow ? EPERM : 0))
      #expect(Sys2.protection(p + "/held") == TestClass.D.name)
    case .unlocked:
      #expect(fixture.deviceState == "UNLOCKED")
    case .grace:
      try fixture.control("lock")
      try #require(fixture.deviceState == "GRACE")
    case .locked:
      try fixture.control("lock")
      try fixture.waitForState("LOCKED")
    case .lockedCXExpired:
      try fixture.control("lock")
      try fixture.waitForState("LOCKED")
      try fixture.waitForCXExpiry()
    }

    let heldClassDiffers = state == .bfu && protectionClass != .D
    for operation in TableOperation.allCases where !(heldClassDiffers && operation.usesHeldHandle) {
      let outcome = perform(operation, held: held, in: p)
      let expected = Self.expectation(protectionClass, operation, state)
      #expect(outcome == expected, "class \(protectionClass) \(operation) in \(state.testDescription)")
    }

    if state == .grace {
      #expect(fixture.deviceState == "GRACE", "grace ended during the test: results may mix two states")
    }
    close(held)
    try fixture.unmount()
  }

  /// Does one operation and reports its outcome.
  func perform(_ operation: TableOperation, held: Int32, in p: String) -> Outcome {
    switch operation {
    case .read: return Sys2.pread(held, count: 5, offset: 0).0
    case .write: return Sys2.pwrite(held, "HELLO", offset: 0)
    case .ftruncate: return Outcome(Glibc.ftruncate(held, 8))
    case .fallocate: return Outcome(Sys2.fallocate(held, 0, 8192))
    case .openExisting: return Sys2.tryOpen(p + "/existing", O_RDONLY)
    case .openExistingCreat: return Sys2.tryOpen(p + "/existing2", O_CREAT | O_RDWR)
    case .createNew: return Sys2.tryOpen(p + "/created", O_CREAT | O_EXCL | O_RDWR)
    case .createNewCreat: return Sys2.tryOpen(p + "/created2", O_CREAT | O_WRONLY | O_TRUNC)
    case .stat:
      var st = Glibc.stat()
      return Outcome(lstat(p + "/meta", &st))
    case .readdir:
      guard let dir = opendir(p) else { return .failed(errno) }
      defer { closedir(dir) }
      errno = 0
      var names: [String] = []
      while let entry = Glibc.readdir(dir) {
        names.append(
          withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
      }
      if errno != 0 { return .failed(errno) }
      return names.contains("existing") ? .ok : .failed(ENOENT)
    case .chmod: return Outcome(Glibc.chmod(p + "/meta", 0o600))
    case .chown: return Outcome(Glibc.chown(p + "/meta", 0, 0))
    case .utimes: return Outcome(utimensat(AT_FDCWD, p + "/meta", nil, 0))
    case .getxattr:
      switch Sys2.getxattr(p + "/meta", ProtectionAttribute.protection) {
      case .success: return .ok
      case .failure(let error): return .failed(error.code.rawValue)
      }
    case .setxattr:
      let code = Sys2.setxattr(p + "/meta", "user.note", "x")
      return code == 0 ? .ok : .failed(code)
    case .rename: return Outcome(Glibc.rename(p + "/meta", p + "/meta2"))
    case .link: return Outcome(Glibc.link(p + "/meta2", p + "/meta3"))
    case .unlink: return Outcome(Glibc.unlink(p + "/meta3"))
    }
  }
}

@Suite("completeUnlessOpen (class B) handles", .needsFUSE, .timeLimit(.minutes(10)))
struct CompleteUnlessOpenTests {
  @Test("a file created while LOCKED is usable until closed; a handle from before the lock keeps working")
  func createdWhileLocked() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    let directory = fixture.path("Documents/b")
    try #require(mkdir(directory, 0o755) == 0)
    try #require(Sys2.setxattr(directory, ProtectionAttribute.protection, "completeUnlessOpen") == 0)
    try Data("before".utf8).write(to: URL(fileURLWithPath: directory + "/old"))
    #expect(Sys2.protection(directory + "/old") == "completeUnlessOpen")
    let (old, oldOpened) = Sys2.open(directory + "/old", O_RDWR)
    try #require(oldOpened == .ok)

    try fixture.control("lock")
    try fixture.waitForState("LOCKED")

    // The handle opened before the lock: read and write.
    #expect(Sys2.pread(old, count: 6) == (.ok, "before"))
    #expect(Sys2.pwrite(old, "locked", offset: 6) == .ok)
    #expect(Sys2.pread(old, count: 12) == (.ok, "beforelocked"))
    #expect(Outcome(ftruncate(old, 10)) == .ok)
    // ... but opening it again is refused.
    #expect(Sys2.tryOpen(directory + "/old", O_RDONLY) == .eperm)

    // A new file: created, written, read back, truncated through its handle.
    let (new, created) = Sys2.open(directory + "/new", O_CREAT | O_EXCL | O_RDWR)
    try #require(created == .ok, "creating a class-B file while LOCKED")
    #expect(Sys2.protection(directory + "/new") == "completeUnlessOpen")
    #expect(Sys2.pwrite(new, "written while locked") == .ok)
    #expect(Sys2.pread(new, count: 64) == (.ok, "written while locked"))
    #expect(Outcome(ftruncate(new, 7)) == .ok)
    #expect(Outcome(fsync(new)) == .ok)
    var st = stat()
    #expect(fstat(new, &st) == 0 && st.st_size == 7)
    close(new)
    // Closed: the file is now an existing class-B file, closed while LOCKED.
    #expect(Sys2.tryOpen(directory + "/new", O_RDONLY) == .eperm)
    #expect(Sys2.tryOpen(directory + "/new", O_WRONLY | O_APPEND) == .eperm)
    // O_CREAT on a name that exists is "open existing".
    #expect(Sys2.tryOpen(directory + "/new", O_CREAT | O_RDWR) == .eperm)
    // Metadata still works.
    #expect(Outcome(access(directory + "/new", F_OK)) == .ok)

    try fixture.control("unlock")
    #expect(try String(contentsOfFile: directory + "/new", encoding: .utf8) == "written")
    #expect(try String(contentsOfFile: directory + "/old", encoding: .utf8) == "beforelock")
    close(old)
    try fixture.unmount()
  }

  @Test("in BFU a class-B file can be created and used until closed")
  func createdInBFU() throws {
    let fixture = try MountFixture(arguments: ["--bfu"]) { backing in
      try FileManager.default.createDirectory(atPath: backing + "/Documents/b", withIntermediateDirectories: true)
      try Sys2.classify(backing + "/Documents/b", .B)
    }
    #expect(fixture.deviceState == "BFU")
    let path = fixture.path("Documents/b/new")
    let (fd, created) = Sys2.open(path, O_CREAT | O_EXCL | O_RDWR)
    try #require(created == .ok)
    #expect(Sys2.pwrite(fd, "bfu data") == .ok)
    #expect(Sys2.pread(fd) == (.ok, "bfu data"))
    close(fd)
    #expect(Sys2.tryOpen(path, O_RDONLY) == .eperm)
    // The first unlock opens it.
    try fixture.control("unlock")
    #expect(try String(contentsOfFile: path, encoding: .utf8) == "bfu data")
    try fixture.unmount()
  }
}
