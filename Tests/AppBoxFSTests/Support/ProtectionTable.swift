import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Data Protection test vocabulary
//
// The tests spell classes, states and expected outcomes themselves (not through
// SandboxPolicy's AccessRule), so that a wrong table in the product cannot make its own
// test pass.

/// A column of docs/reference.md's table. `lockedCXExpired` is LOCKED after the
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

  /// The state's name in events and on the root.
  var deviceState: String {
    switch self {
    case .bfu: "BFU"
    case .unlocked: "UNLOCKED"
    case .grace: "GRACE"
    case .locked, .lockedCXExpired: "LOCKED"
    }
  }
}

/// A row of the table: what the test does.
enum TableOperation: String, CaseIterable, Sendable {
  // Handle I/O on a handle opened before the state was entered.
  case read, write, ftruncate, fallocate, copyFrom
  // Opening. The `Creat` variants are `create` requests without O_EXCL, as the kernel
  // sends for O_CREAT opens of names it has not looked up (existing or not).
  case openExisting, openExistingCreat, openTruncating, truncateByPath, createNew, createNewCreat, mknodNew
  // Metadata.
  case lookup, getattr, readdir, chmod, chown, utimes, getxattr, listxattr, setxattr, rename, link, unlink

  /// Whether the operation works on the handle opened before the state was entered.
  var usesHeldHandle: Bool {
    switch self {
    case .read, .write, .ftruncate, .fallocate, .copyFrom: true
    default: false
    }
  }

  /// The table's row this operation is judged by.
  var row: Row {
    switch self {
    case .read, .write, .ftruncate, .fallocate, .copyFrom: .handleIO
    case .openExisting, .openExistingCreat, .openTruncating, .truncateByPath: .openExisting
    case .createNew, .createNewCreat, .mknodNew: .createNew
    default: .metadata
    }
  }

  enum Row { case createNew, openExisting, handleIO, metadata }
}

/// The table, written out: whether each row is allowed, by state (BFU, UNLOCKED, GRACE,
/// LOCKED, LOCKED after the CX timeout).
enum ProtectionTable {
  static let rows: [TestClass: [TableOperation.Row: [Bool]]] = [
    .A: [
      .createNew: [false, true, true, false, false],
      .openExisting: [false, true, true, false, false],
      .handleIO: [false, true, true, false, false],
    ],
    .B: [
      .createNew: [true, true, true, true, true],
      .openExisting: [false, true, true, false, false],
      .handleIO: [true, true, true, true, true],
    ],
    .C: [
      .createNew: [false, true, true, true, true],
      .openExisting: [false, true, true, true, true],
      .handleIO: [false, true, true, true, true],
    ],
    .CX: [
      .createNew: [false, true, true, true, false],
      .openExisting: [false, true, true, true, false],
      .handleIO: [false, true, true, true, false],
    ],
    .D: [
      .createNew: [true, true, true, true, true],
      .openExisting: [true, true, true, true, true],
      .handleIO: [true, true, true, true, true],
    ],
  ]

  static func allowed(_ protectionClass: TestClass, _ operation: TableOperation, _ state: TableState) -> Bool {
    guard operation.row != .metadata else { return true }  // never refused
    return rows[protectionClass]![operation.row]![state.rawValue]
  }

  /// A sandbox in `state` with a directory `Documents/p` of `protectionClass` holding
  /// `existing`, `existing2`, `existing3`, `existing4`, `held`, `source` and `meta`, all of
  /// the class (prepared in the backing tree, as a copied sandbox would have them), and
  /// `held` and `source` open from before the state was entered (class D in BFU, where no
  /// other class can be opened); and `Documents/out`, of class D.
  static func sandbox(_ state: TableState, _ protectionClass: TestClass) throws -> (Sandbox, OpenFile, OpenFile) {
    let box = try Sandbox(
      { options in
        switch state {
        case .bfu: options.startUnlocked = false
        case .unlocked: break
        case .grace: options.gracePeriod = 600
        case .locked: options.inactivityTimeout = 600
        case .lockedCXExpired: options.inactivityTimeout = 0.05
        }
      },
      prepare: { backing in
        let directory = backing + "/Documents/p"
        try Sys.mkdir(backing + "/Documents", 0o755)
        try Sys.mkdir(directory, 0o755)
        try classify(directory, protectionClass)
        try Sys.mkdir(backing + "/Documents/out", 0o755)  // where copies go: class D, open in every state
        try classify(backing + "/Documents/out", .D)
        for name in ["existing", "existing2", "existing3", "existing4", "held", "source", "meta"] {
          try TestFiles.write(directory + "/" + name, Array("hello world, this is \(name)\n".utf8))
          let isHeld = name == "held" || name == "source"
          try classify(directory + "/" + name, state == .bfu && isHeld ? .D : protectionClass)
        }
      })
    let held = try box.open("Documents/p/held", flags: O_RDWR)
    let source = try box.open("Documents/p/source", flags: O_RDONLY)
    switch state {
    case .bfu: #expect(box.fs.deviceState == .bfu)
    case .unlocked: #expect(box.fs.deviceState == .unlocked)
    case .grace: #expect(box.fs.lock() == .grace)
    case .locked: #expect(box.fs.lock() == .locked)
    case .lockedCXExpired:
      #expect(box.fs.lock() == .locked)
      #expect(box.eventually { box.fs.protection.snapshot.cxExpired }, "the CX timeout ran out")
    }
    return (box, held, source)
  }

  /// Gives a backing file or directory a class, as a prepared backing tree would have it.
  static func classify(_ path: String, _ protectionClass: TestClass) throws {
    let fd = try Sys.open(path, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
    defer { Sys.close(fd) }
    try Xattr.set(fd, name: AppBoxAttribute.protection.name, value: Array(protectionClass.name.utf8))
  }

  /// Does one operation in `Documents/p`: nil when it succeeded, else its error.
  static func perform(_ operation: TableOperation, in box: Sandbox, held: OpenFile, source: OpenFile) -> Errno? {
    let p = "Documents/p"
    do throws(Errno) {
      switch operation {
      case .read: _ = try box.read(held, count: 5)
      case .write: _ = try box.write(held, bytes("HELLO"))
      case .ftruncate: try box.truncate(held, to: 8)
      case .fallocate: try box.fallocate(held, offset: 0, length: 8192)
      case .copyFrom:
        let target = try box.create("Documents/out/copy")
        defer { box.release(target) }
        _ = try box.copy(from: source, to: target, count: 5)
      case .openExisting: box.release(try box.open(p + "/existing"))
      case .openExistingCreat: box.release(try box.create(p + "/existing2", flags: O_RDWR))
      case .openTruncating: box.release(try box.open(p + "/existing3", flags: O_WRONLY | O_TRUNC))
      case .truncateByPath: try box.truncate(p + "/existing4", to: 3)
      case .createNew: box.release(try box.create(p + "/created"))
      case .createNewCreat: box.release(try box.create(p + "/created2", flags: O_WRONLY | O_TRUNC))
      case .mknodNew: try box.mknod(p + "/node", mode: S_IFREG | 0o644)
      case .lookup: _ = try box.lookup(p + "/meta")
      case .getattr: _ = try box.getattr(p + "/meta")
      case .readdir:
        guard try box.list(p).contains("existing") else { return .noEntry }
      case .chmod: try box.chmod(p + "/meta", 0o600)
      case .chown:
        var attributes = stat()
        attributes.st_uid = 0
        attributes.st_gid = 0
        _ = try box.fs.setattr(
          Sandbox.root, node: try box.lookup(p + "/meta"), attributes: attributes, fields: [.uid, .gid], handle: nil)
      case .utimes: try box.setTimes(p + "/meta", seconds: 1_000_000_000)
      case .getxattr: _ = try box.protection(p + "/meta")
      case .listxattr: _ = try box.listxattr(p + "/meta")
      case .setxattr: try box.setxattr(p + "/meta", "user.note", "x")
      case .rename: try box.rename(p + "/meta", to: p + "/meta2")
      case .link: try box.link(p + "/meta2", as: p + "/meta3")
      case .unlink: try box.unlink(p + "/meta3")
      }
      return nil
    } catch {
      return error
    }
  }

  /// Runs every operation in `state` on files of `protectionClass` and checks each
  /// outcome against the table; every refusal is EPERM, counted, and logged with its
  /// class and the state; nothing refused was created; the books stay exact.
  static func check(
    _ protectionClass: TestClass, _ state: TableState, sourceLocation: SourceLocation = #_sourceLocation
  )
    throws
  {
    let (box, held, source) = try sandbox(state, protectionClass)
    let before = box.fs.protection.counters.withLock { $0.totalRefusals }
    // In BFU the held handles are class D's (no other class opens there).
    let heldIsOtherClass = state == .bfu && protectionClass != .D
    var refusals = 0
    for operation in TableOperation.allCases where !(heldIsOtherClass && operation.usesHeldHandle) {
      let outcome = perform(operation, in: box, held: held, source: source)
      let allowed = allowed(protectionClass, operation, state)
      #expect(
        outcome == (allowed ? nil : .notPermitted),
        "class \(protectionClass) \(operation) in \(state.testDescription): \(outcome.map { "\($0)" } ?? "ok")",
        sourceLocation: sourceLocation)
      if outcome == .notPermitted { refusals += 1 }
    }
    if !allowed(protectionClass, .createNew, state) {
      #expect(!box.backingHas("Documents/p/created"), "nothing created", sourceLocation: sourceLocation)
      #expect(!box.backingHas("Documents/p/created2"), sourceLocation: sourceLocation)
      #expect(!box.backingHas("Documents/p/node"), sourceLocation: sourceLocation)
    }
    if !allowed(protectionClass, .openExisting, state) {
      #expect(
        try box.backingStat("Documents/p/existing3").st_size > 0, "a refused O_TRUNC truncates nothing",
        sourceLocation: sourceLocation)
      #expect(try box.backingStat("Documents/p/existing4").st_size > 3, sourceLocation: sourceLocation)
    }
    #expect(
      box.fs.protection.counters.withLock { $0.totalRefusals } - before == refusals, "counted",
      sourceLocation: sourceLocation)
    // Repeated refusals (same path, class, operation and state) are coalesced into one
    // event with a count: the counts add up.
    let logged = box.eventObjects("refusal")
    #expect(
      logged.map { ($0["count"] as? Int) ?? 1 }.reduce(0, +) == refusals, "logged", sourceLocation: sourceLocation)
    for event in logged {
      #expect(event["state"] as? String == state.deviceState, sourceLocation: sourceLocation)
      #expect(event["class"] as? String == protectionClass.name, sourceLocation: sourceLocation)
      #expect((event["path"] as? String)?.hasPrefix("Documents/p/") == true, sourceLocation: sourceLocation)
    }
    if state == .grace {
      #expect(box.fs.deviceState == .grace, "grace ended during the test", sourceLocation: sourceLocation)
    }
    box.release(held)
    box.release(source)
    try box.expectExactBooks(sourceLocation: sourceLocation)
  }
}
