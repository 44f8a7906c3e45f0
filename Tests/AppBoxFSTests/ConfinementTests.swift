import AppBoxEvents
import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// Runs by thread id, as a table: a stand-in for the daemon's control groups.
final class TableRuns: RunMembership {
  let table = Mutex<[pid_t: RunAccess]>([:])
  /// Threads whose run cannot be told (as a `/proc` entry that cannot be read).
  let unreadable = Mutex<Set<pid_t>>([])
  /// How many times a thread was looked up.
  let asked = Atomic<Int>(0)

  var hasRuns: Bool { !table.withLock { $0.isEmpty } }

  func run(of tid: pid_t) throws(Errno) -> RunAccess? {
    asked.add(1, ordering: .relaxed)
    if unreadable.withLock({ $0.contains(tid) }) { throw Errno(rawValue: ESRCH) }
    return table.withLock { $0[tid] }
  }
}

/// A device's app confinement below the mount (docs/architecture.md#app-confinement): a
/// program of an app's run reaches its container and its groups' and gets EPERM for any
/// other container, existing or not; everyone else sees the whole device.
@Suite("App confinement")
struct ConfinementTests {
  static let widget = "com.example.widget"
  static let app = "com.example.app"
  static let other = "com.example.other"
  static let shared = "group.com.example.shared"
  static let otherGroup = "group.com.example.other"
  /// The widget's program's thread, and a thread of no run.
  static let confinedTID: pid_t = 4001
  static let freeTID: pid_t = 4002

  static func caller(_ tid: pid_t) -> Caller { Caller(uid: 0, gid: 0, pid: tid, umask: 0o022) }
  static var confined: Caller { caller(confinedTID) }
  static var free: Caller { caller(freeTID) }

  /// A device with the widget and app in one group, another app in a group of its own,
  /// a file in each container, and the widget's program registered as a run.
  static func device() throws -> (Sandbox, TableRuns) {
    let runs = TableRuns()
    let box = try Sandbox.device(runs: runs)
    try box.install(app, groups: [shared])
    try box.install(widget, groups: [shared])
    try box.install(other, groups: [otherGroup])
    for container in [Sandbox.app(app), Sandbox.app(widget), Sandbox.app(other)] {
      try box.writeFile(container + "/Documents/f", Array("data".utf8))
    }
    try box.writeFile(Sandbox.group(shared) + "/f", Array("shared".utf8))
    try box.writeFile(Sandbox.group(otherGroup) + "/f", Array("other".utf8))
    let access = try #require(box.fs.access(for: Sandbox.id(widget)))
    runs.table.withLock { $0[confinedTID] = access }
    return (box, runs)
  }

  /// Looks `path` up component by component as `caller`.
  static func lookup(_ box: Sandbox, _ path: String, as caller: Caller) throws(Errno) -> Entry {
    var entry = Entry(node: .root, attributes: stat(), entryTimeout: 0, attributeTimeout: 0)
    for component in path.split(separator: "/") {
      entry = try FileName.withBytes(Array(component.utf8)) { (name) throws(Errno) -> Entry in
        try box.fs.lookup(caller, parent: entry.node, name: name)
      }
      if entry.node.rawValue == 0 { throw .noEntry }
    }
    return entry
  }

  @Test("a run's program reaches its own container and its group's; any other container is EPERM, existing or not")
  func lookups() throws {
    let (box, _) = try Self.device()
    for path in [Sandbox.app(Self.widget) + "/Documents/f", Sandbox.group(Self.shared) + "/f"] {
      #expect(try Self.lookup(box, path, as: Self.confined).node.rawValue != 0, "\(path)")
    }
    for path in [
      Sandbox.app(Self.other), Sandbox.app(Self.app) + "/Documents/f", Sandbox.group(Self.otherGroup),
      Sandbox.app("com.example.absent"), Sandbox.group("group.absent"),
    ] {
      #expect(throws: Errno.notPermitted, "\(path)") { try Self.lookup(box, path, as: Self.confined) }
    }
    // Staging and other names a directory of containers hides: EPERM too, not ENOENT.
    #expect(throws: Errno.notPermitted) { try Self.lookup(box, "Containers/Data/Application/x", as: Self.confined) }
    // The device's own directories are not containers: a run's program walks through them.
    #expect(try Self.lookup(box, "Containers/Shared", as: Self.confined).node.rawValue != 0)
    // Another process sees every container.
    for path in [Sandbox.app(Self.other) + "/Documents/f", Sandbox.group(Self.otherGroup) + "/f"] {
      #expect(try Self.lookup(box, path, as: Self.free).node.rawValue != 0)
    }
  }

  @Test("every request on an item of another container is EPERM to a run's program, but those on an open handle")
  func requestsOnNodes() throws {
    let (box, _) = try Self.device()
    let path = Sandbox.app(Self.other) + "/Documents/f"
    let node = try box.lookup(path)
    let directory = try box.lookup(Sandbox.app(Self.other) + "/Documents")
    let c = Self.confined
    #expect(throws: Errno.notPermitted) { try box.fs.open(c, node: node, flags: O_RDONLY) }
    #expect(throws: Errno.notPermitted) { try box.fs.access(c, node: node, mask: R_OK) }
    #expect(throws: Errno.notPermitted) { try box.fs.listxattr(c, node: node) }
    #expect(throws: Errno.notPermitted) { try box.fs.opendir(c, node: directory, flags: O_RDONLY) }
    #expect(throws: Errno.notPermitted) {
      try FileName.withBytes(Array("f".utf8)) { (name) throws(Errno) in
        try box.fs.unlink(c, parent: directory, name: name)
      }
    }
    #expect(throws: Errno.notPermitted) {
      try FileName.withBytes(Array("new".utf8)) { (name) throws(Errno) in
        _ = try box.fs.create(c, parent: directory, name: name, mode: 0o644, flags: O_RDWR)
      }
    }
    #expect(box.backingHas(path) && !box.backingHas(Sandbox.app(Self.other) + "/Documents/new"))
    // A descriptor opened outside the run (inherited) is a capability: its reads, and
    // getattr (fstat sends it without the handle), are not checked.
    #expect(try box.fs.getattr(c, node: node, handle: nil).st_size == 4)
    let opened = try box.open(path)
    let data = try box.fs.read(c, node: opened.node, handle: opened.handle, count: 4, offset: 0)
    if case .file(_, _, let count) = data { #expect(count == 4) }
    #expect(try box.fs.getattr(c, node: opened.node, handle: opened.handle).st_size == 4)
    box.release(opened)
    // Its own container's items: everything works.
    let own = try box.lookup(Sandbox.app(Self.widget) + "/Documents/f")
    #expect(try box.fs.getattr(c, node: own, handle: nil).st_size == 4)
  }

  @Test("listing a directory of containers is EPERM to a run's program; Containers/ itself lists")
  func listings() throws {
    let (box, _) = try Self.device()
    #expect(box.fs.needsOpendir, "a device's opendir confines: the kernel must ask")
    for path in ["Containers/Data/Application", "Containers/Shared/AppGroup"] {
      let node = try box.lookup(path)
      #expect(throws: Errno.notPermitted) { try box.fs.opendir(Self.confined, node: node, flags: O_RDONLY) }
      let handle = try box.fs.opendir(Self.free, node: node, flags: O_RDONLY).handle
      box.fs.releasedir(Self.free, node: node, handle: handle)
    }
    let containers = try box.lookup("Containers")
    let handle = try box.fs.opendir(Self.confined, node: containers, flags: O_RDONLY).handle
    box.fs.releasedir(Self.confined, node: containers, handle: handle)
  }

  @Test("a request under Containers/ with pid 0 is refused on a device, with or without runs")
  func pidZero() throws {
    let box = try Sandbox.device()
    try box.install(Self.app)
    let zero = Self.caller(0)
    #expect(throws: Errno.notPermitted) { try Self.lookup(box, Sandbox.app(Self.app), as: zero) }
    let node = try box.lookup(Sandbox.app(Self.app) + "/Documents")
    #expect(throws: Errno.notPermitted) { try box.fs.opendir(zero, node: node, flags: O_RDONLY) }
    // Outside the containers it is no one's business.
    #expect(try Self.lookup(box, "Containers/Data", as: zero).node.rawValue != 0)
    // A plain mount has no containers: pid 0 is served as before.
    let plain = try Sandbox()
    #expect(try Self.lookup(plain, "Documents", as: zero).node.rawValue != 0)
    #expect(box.fs.statusJSON().contains("\"noProcess\":2"))
  }

  @Test("a thread whose run cannot be told is refused (fail closed), and nothing is asked while no run exists")
  func unverifiable() throws {
    let (box, runs) = try Self.device()
    runs.unreadable.withLock { _ = $0.insert(Self.freeTID) }
    #expect(throws: Errno.notPermitted) { try Self.lookup(box, Sandbox.app(Self.app), as: Self.free) }
    #expect(box.fs.statusJSON().contains("\"unverifiable\":1"))
    // No run: no request asks who runs as what.
    runs.table.withLock { $0.removeAll() }
    let before = runs.asked.load(ordering: .relaxed)
    #expect(try Self.lookup(box, Sandbox.app(Self.other) + "/Documents/f", as: Self.free).node.rawValue != 0)
    #expect(runs.asked.load(ordering: .relaxed) == before)
  }

  @Test("each refusal is counted; each app, container and reason is logged once")
  func countedAndLogged() throws {
    let (box, _) = try Self.device()
    for _ in 0..<5 {
      #expect(throws: Errno.notPermitted) { try Self.lookup(box, Sandbox.app(Self.other), as: Self.confined) }
    }
    #expect(throws: Errno.notPermitted) { try Self.lookup(box, Sandbox.group(Self.otherGroup), as: Self.confined) }
    let status = box.fs.statusJSON()
    #expect(status.contains("\"confinement\":{\"enforced\":true,\"refusals\":6,"))
    #expect(status.contains("\"otherContainer\":6"))
    let lines = box.events("confinement")
    #expect(lines.count == 2)
    let events = try lines.map { try AppBoxEvent.decode(Array($0.utf8)) }
    guard case .confinement(let first) = events.first else {
      Issue.record("not a confinement event: \(lines)")
      return
    }
    #expect(first.app == Self.widget && first.container == Self.other && first.reason == .otherContainer)
    #expect(first.path == Sandbox.app(Self.other) && first.operation == "lookup")
  }

  @Test("the kernel never caches a container's entry, nor a miss in a directory of containers; other entries it does")
  func entryTimeouts() throws {
    let (box, _) = try Self.device()
    #expect(try Self.lookup(box, Sandbox.app(Self.widget), as: Self.free).entryTimeout == 0)
    #expect(try Self.lookup(box, Sandbox.group(Self.shared), as: Self.free).entryTimeout == 0)
    #expect(try Self.lookup(box, Sandbox.app(Self.widget) + "/Documents", as: Self.free).entryTimeout > 0)
    let application = try box.lookup("Containers/Data/Application")
    let miss = try FileName.withBytes(Array("com.example.absent".utf8)) { (name) throws(Errno) in
      try box.fs.lookup(Self.free, parent: application, name: name)
    }
    #expect(miss.node.rawValue == 0 && miss.entryTimeout == 0)
  }

  @Test("a renamed or linked item never leaves its container, for a run's program either (EXDEV)")
  func crossContainerMoves() throws {
    let (box, _) = try Self.device()
    let own = try box.lookup(Sandbox.app(Self.widget) + "/Documents")
    let group = try box.lookup(Sandbox.group(Self.shared))
    let file = try box.lookup(Sandbox.app(Self.widget) + "/Documents/f")
    #expect(throws: Errno.crossDevice) {
      try FileName.withBytes(Array("f".utf8)) { (name) throws(Errno) in
        try box.fs.rename(Self.confined, parent: own, name: name, newParent: group, newName: name, flags: 0)
      }
    }
    #expect(throws: Errno.crossDevice) {
      try FileName.withBytes(Array("g".utf8)) { (name) throws(Errno) in
        _ = try box.fs.link(Self.confined, node: file, newParent: group, newName: name)
      }
    }
    // Into its own container from another: the other side is EPERM first.
    let otherDocuments = try box.lookup(Sandbox.app(Self.other) + "/Documents")
    #expect(throws: Errno.notPermitted) {
      try FileName.withBytes(Array("f".utf8)) { (name) throws(Errno) in
        try box.fs.rename(Self.confined, parent: otherDocuments, name: name, newParent: own, newName: name, flags: 0)
      }
    }
  }
}
