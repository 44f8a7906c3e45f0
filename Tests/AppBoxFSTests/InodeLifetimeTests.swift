import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// Whether this process may open files by handle (CAP_DAC_READ_SEARCH), as the daemon
/// needs to keep file handles valid after the kernel forgets a node. The tests that need
/// it put the backing directory on a tmpfs of its own (as root), which gives handles
/// where a container's overlay `/tmp` does not. Under CI they run regardless, and fail
/// without it.
enum HandleSupport {
  static let capable: Bool = {
    guard let status = TestFiles.text(of: "/proc/self/status"),
      let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
      let mask = UInt64(line.dropFirst("CapEff:".count).drop { $0 == " " || $0 == "\t" }, radix: 16)
    else { return false }
    return mask & (1 << 2) != 0 && geteuid() == 0
  }()

  static var enabled: Bool { capable || getenv("CI") != nil }

  static let missing = "needs root with CAP_DAC_READ_SEARCH (open_by_handle_at) and a tmpfs of its own"
}

/// Node ids, lookup counts, forgets, file handles (lookups of "." and ".."), stale
/// handles and generations: what the kernel holds and what the filesystem gives back.
@Suite("Inode and handle lifetimes through the protocol")
struct InodeLifetimeTests {
  /// `lookup` of `name` in `parent` (one lookup).
  static func lookup(_ box: Sandbox, _ parent: NodeID, _ name: String) throws(Errno) -> Entry {
    try FileName.withBytes(bytes(name)) { (name) throws(Errno) in
      try box.fs.lookup(Sandbox.root, parent: parent, name: name)
    }
  }

  /// What the kernel does when it decodes a file handle of `node`: a lookup of ".".
  static func lookupHandle(_ box: Sandbox, _ node: NodeID) throws(Errno) -> Entry {
    try lookup(box, node, ".")
  }

  @Test("each lookup adds one to a node's count, each forget takes its count away; at zero the node is dropped")
  func lookupCounts() throws {
    let box = try Sandbox { $0.retainedHandles = 0 }
    try box.writeFile("Documents/f", [1])
    let documents = try box.lookup("Documents")
    let held = box.fs.inodes.count
    let first = try Self.lookup(box, documents, "f")
    let second = try Self.lookup(box, documents, "f")
    #expect(first.node == second.node)
    #expect(box.lookups(first.node) == 3, "the create's and two lookups")
    box.fs.forget(first.node, count: 2)
    #expect(box.lookups(first.node) == 1)
    box.fs.forget(first.node, count: 1)
    #expect(box.fs.inodes.count == held - 1, "dropped, its descriptor closed")
    if case .stale = box.fs.inodes.resolve(first.node) {} else { Issue.record("a dropped node resolves") }
  }

  @Test("create, mkdir, mknod, symlink and link each take one lookup on the node they return")
  func creatingTakesALookup() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    box.release(file)
    #expect(box.lookups(file.node) == 1)
    #expect(box.lookups(try box.mkdir("Documents/d")) == 1)
    #expect(box.lookups(try box.mknod("Documents/n", mode: S_IFIFO | 0o644)) == 1)
    #expect(box.lookups(try box.symlink("f", at: "Documents/s")) == 1)
    let linked = try box.link("Documents/f", as: "Documents/g")
    #expect(linked == file.node, "a hard link is the same node")
    #expect(box.lookups(linked) == 3, "the create's, the lookup of its path, the link's")
  }

  @Test("readdirplus: every entry but . and .. holds one lookup; entries that do not fit give theirs back")
  func readdirplusLookups() throws {
    let box = try Sandbox()
    for name in ["a", "b", "c", "d"] { try box.writeFile("Documents/" + name, [1]) }
    let nodes = try ["a", "b", "c", "d"].map { try box.lookup("Documents/" + $0) }
    let before = nodes.map { box.lookups($0) }
    let documents = try box.lookup("Documents")
    let handle = try box.fs.opendir(Sandbox.root, node: documents, flags: O_RDONLY).handle
    defer { box.fs.releasedir(Sandbox.root, node: documents, handle: handle) }
    var filler = ListFiller(plus: true, capacity: 4)  // ., .., and two entries
    try box.fs.readdir(Sandbox.root, node: documents, handle: handle, offset: 0, filler: &filler)
    #expect(filler.names.count == 4)
    let listed = Set(filler.entries.filter { $0.node.rawValue != 0 }.map(\.node))
    #expect(listed.count == 2)
    let after = nodes.map { box.lookups($0) }
    #expect(
      zip(nodes, zip(before, after)).allSatisfy { node, counts in counts.1 == counts.0 + (listed.contains(node) ? 1 : 0)
      })
    // The rest, from where the reply stopped.
    var rest = ListFiller(plus: true)
    try box.fs.readdir(Sandbox.root, node: documents, handle: handle, offset: filler.nextOffset, filler: &rest)
    let names = Set((filler.names + rest.names).map { String(decoding: $0, as: UTF8.self) })
    #expect(names == [".", "..", "a", "b", "c", "d"])
    #expect(nodes.map { box.lookups($0) } == before.map { $0 + 1 }, "each listed once")
  }

  @Test("a node id holds no daemon address: node ids are small, distinct, and not given out again")
  func nodeIDsAreOpaque() throws {
    let box = try Sandbox { $0.retainedHandles = 0 }
    var seen = Set<UInt64>()
    for index in 0..<20 {
      let file = try box.create("Documents/f\(index)")
      box.release(file)
      let node = file.node.rawValue
      // A heap address on x86-64 and arm64 Linux is far above 2^40; a slot with its use
      // count is far below.
      #expect(node > 1 && node < 1 << 40, "node id \(String(node, radix: 16)) looks like an address")
      #expect(seen.insert(node).inserted, "node id \(node) given out twice")
      try box.unlink("Documents/f\(index)")
      box.fs.forget(file.node, count: box.lookups(file.node))
    }
    #expect(box.fs.inodes.count < 10, "the slots were reused, under new ids")
  }

  @Test("every entry carries the mount's generation, the root's is 0; a remount draws another")
  func generations() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    let entry = try Self.lookup(box, try box.lookup("Documents"), "f")
    #expect(entry.generation == box.fs.generation && entry.generation != 0)
    #expect(try Self.lookupHandle(box, .root).generation == 0)
    let again = try box.remount()
    let later = try Self.lookup(again, try again.lookup("Documents"), "f")
    #expect(later.generation != entry.generation)
  }

  @Test("lookup of \"..\" gives a directory's parent, the root's own node for the root; ENOTDIR for a file")
  func dotDot() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/d")
    try box.writeFile("Documents/d/f", [1])
    let documents = try box.lookup("Documents")
    let d = try box.lookup("Documents/d")
    #expect(try Self.lookup(box, d, "..").node == documents)
    #expect(try Self.lookup(box, documents, "..").node == .root)
    #expect(try Self.lookup(box, .root, "..").node == .root)
    #expect(throws: Errno.notDirectory) { try Self.lookup(box, try box.lookup("Documents/d/f"), "..") }
  }

  @Test("a held node's handle gives the same node; a file unlinked since gives ESTALE")
  func heldHandles() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    let node = try box.lookup("Documents/f")
    #expect(try Self.lookupHandle(box, node).node == node)
    try box.unlink("Documents/f")
    #expect(throws: Errno.stale) { try Self.lookupHandle(box, node) }
    #expect(throws: Errno.stale) { try Self.lookupHandle(box, NodeID(rawValue: 0xFFFF_0000_1234)) }
  }

  @Test(
    "a forgotten file's handle finds it again, under the same node id, in its domain",
    .enabled(if: HandleSupport.enabled, Comment(rawValue: HandleSupport.missing)))
  func forgottenHandles() throws {
    let box = try Sandbox(tmpfs: "size=64m")
    #expect(box.fs.handleMountFD >= 0, "open_by_handle_at is available")
    try box.writeFile("Library/Caches/f", pattern(5000))
    try box.mkdir("Documents/d")
    let file = try box.lookup("Library/Caches/f")
    let directory = try box.lookup("Documents/d")
    for node in [file, directory] { box.fs.forget(node, count: box.lookups(node)) }
    #expect(box.fs.inodes.retainedCount == 2)
    let found = try Self.lookupHandle(box, file)
    #expect(found.node == file)
    #expect(found.generation == box.fs.generation)
    #expect(try Self.lookupHandle(box, directory).node == directory)
    #expect(try box.contents("Library/Caches/f") == pattern(5000))
    guard case .held(let inode) = box.fs.inodes.resolve(file) else {
      Issue.record("not held again")
      return
    }
    #expect(inode.domain == .caches)
    // Found by handle it has no name yet; a lookup gives it one, where the kernel's caches
    // are dropped from.
    _ = try box.lookup("Library/Caches/f")
    box.fs.dropKernelCaches(sparing: [])
    #expect(box.notifier.calls.contains(.invalidateEntry(parent: try box.lookup("Library/Caches"), name: bytes("f"))))
    try box.expectExactBooks()
  }

  @Test("--handles 0 keeps no forgotten node: their handles are stale at once")
  func noRetainedHandles() throws { try Self.retained(limit: 0) }

  @Test(
    "--handles bounds the forgotten nodes whose handles stay valid: the last ones forgotten",
    .enabled(if: HandleSupport.enabled, Comment(rawValue: HandleSupport.missing)))
  func retainedHandlesAreBounded() throws { try Self.retained(limit: 3, tmpfs: "size=64m") }

  /// Forgets 8 files in a sandbox that retains `limit`: exactly the last `limit` are found
  /// by handle again.
  static func retained(limit: Int, tmpfs: String? = nil) throws {
    let box = try Sandbox({ $0.retainedHandles = limit }, tmpfs: tmpfs)
    var nodes: [NodeID] = []
    for index in 0..<8 {
      try box.writeFile("Documents/f\(index)", bytes("\(index)"))
      nodes.append(try box.lookup("Documents/f\(index)"))
    }
    for node in nodes { box.fs.forget(node, count: box.lookups(node)) }
    #expect(box.fs.inodes.retainedCount == limit)
    #expect(TestFiles.number(box.status, "retainedHandles") == Int64(limit))
    let found = nodes.filter { (try? Self.lookupHandle(box, $0)) != nil }  // nil: ESTALE, as expected beyond
    #expect(found.count == limit)
    #expect(found == Array(nodes.suffix(limit)), "the most recently forgotten are kept")
  }

  @Test("a purged file's handle is stale, held or forgotten; every handle from before a remount is stale")
  func purgedAndRemountedHandlesAreStale() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/scratch", bytes("t"))
    try box.writeFile("tmp/held", bytes("h"))
    try box.writeFile("Documents/kept", bytes("k"))
    let scratch = try box.lookup("tmp/scratch")
    let held = try box.lookup("tmp/held")
    let kept = try box.lookup("Documents/kept")
    let documents = try box.lookup("Documents")
    box.fs.forget(scratch, count: box.lookups(scratch))
    #expect(box.fs.purge(.domain(.tmp)).files == 2)
    #expect(throws: Errno.stale) { try Self.lookupHandle(box, scratch) }
    #expect(throws: Errno.stale) { try Self.lookupHandle(box, held) }
    #expect(try Self.lookupHandle(box, kept).node == kept)
    // The same files under a new filesystem: its ids start again, its generation differs,
    // so the kernel refuses old handles that name the same id (the id itself may be
    // given out again: the generation tells them apart).
    let again = try box.remount()
    try again.writeFile("Documents/new", bytes("n"))
    let newKept = try again.lookup("Documents/kept")
    #expect(try Self.lookupHandle(again, newKept).generation != box.fs.generation)
    for old in [kept, documents] where old != newKept {
      if let entry = try? Self.lookupHandle(again, old) {  // nil: ESTALE
        #expect(entry.generation != box.fs.generation, "an old handle would be stale by its generation")
      }
    }
  }

  @Test("a removed file, forgotten, leaves no retained handle behind")
  func removedFilesAreNotRetained() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    let node = try box.lookup("Documents/f")
    try box.unlink("Documents/f")
    box.fs.forget(node, count: box.lookups(node))
    #expect(box.fs.inodes.retainedCount == 0)
    #expect(throws: Errno.stale) { try Self.lookupHandle(box, node) }
  }

  @Test("drop-caches asks the kernel to drop idle nodes' entries, not open files' nor working directories'")
  func dropKernelCaches() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/cwd")
    try box.writeFile("Documents/idle", [1])
    try box.writeFile("Documents/open", [1])
    let documents = try box.lookup("Documents")
    _ = try box.lookup("Documents/idle")
    let open = try box.open("Documents/open")
    let cwd = try box.backingStat("Documents/cwd").st_ino
    box.fs.dropKernelCaches(sparing: [UInt64(cwd)])
    let invalidated = box.notifier.calls.compactMap { call -> String? in
      guard case .invalidateEntry(let parent, let name) = call, parent == documents else { return nil }
      return String(decoding: name, as: UTF8.self)
    }
    #expect(invalidated.contains("idle"))
    #expect(!invalidated.contains("open"), "an open file stays")
    #expect(!invalidated.contains("cwd"), "a working directory stays")
    box.release(open)
  }

  /// An invalidation waits for its directory's lock, which a request in that directory
  /// may hold while it waits for a descriptor (a lookup in an `unlink` past the descriptor
  /// limit): the forgets that come meanwhile must close their descriptors, or that request
  /// waits in vain and answers EMFILE (seen as `unlink` failing with errno 24 over io_uring).
  @Test("a forget while an entry invalidation waits for its directory closes the forgotten node's descriptor")
  func forgetDuringHeldInvalidation() throws {
    let box = try Sandbox()
    for index in 0..<8 { try box.writeFile("Documents/f\(index)", [1]) }
    let nodes = try (0..<8).map { (index) throws(Errno) in try box.lookup("Documents/f\(index)") }
    weak var forgotten = box.fs.inodes.inode(nodes[0])
    #expect(forgotten != nil)
    box.notifier.holdInvalidations()
    defer { box.notifier.releaseInvalidations() }
    let dropping = RequestThread { box.fs.dropKernelCaches(sparing: []) }
    #expect(box.notifier.waitForHeldInvalidation(), "the drop never reached an invalidation")
    for node in nodes { box.fs.forget(node, count: box.lookups(node)) }
    #expect(forgotten == nil, "the forgotten node's inode, and so its descriptor, is kept while the drop waits")
    box.notifier.releaseInvalidations()
    #expect(dropping.finish())
  }

  @Test("forgetting a node measures its file: what was allocated since is charged")
  func forgetMeasures() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    #expect(try box.write(file, pattern(300_000)) == 300_000)
    box.release(file)
    box.fs.forget(file.node, count: box.lookups(file.node))
    try box.expectExactBooks()
  }
}
