import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A request that meets a purge between its two steps (the victim committed to, not yet
/// unlinked) waits for it: asleep, not spinning, and it wakes when the purge is done.
@Suite("Requests waiting for a purge")
struct PurgeWaitTests {
  /// A sandbox with `path` in Caches, held by the kernel, and a purge of Caches that has
  /// taken it and committed to unlinking it (the moment just before its unlink).
  static func committedVictim(_ path: String) throws -> (Sandbox, NodeID, StorageState.PurgePlan) {
    let box = try Sandbox()
    let components = path.split(separator: "/")
    for depth in 3..<components.count { _ = try box.mkdir(components[..<depth].joined(separator: "/")) }
    try box.makeFile(path, bytes: 8192)
    let node = try box.lookup(path)
    let plan = box.fs.storage.plan(reason: .explicit) { catalog, _ in catalog.victims(inDomain: .caches) }
    try #require(plan.victims.count == 1)
    #expect(box.fs.storage.commit(plan.victims[0].ino, plan: plan.serial) != nil)
    return (box, node, plan)
  }

  /// Expects `request` to sleep while the purge is committed, and to return once the
  /// purge is carried out.
  static func expectSleepsUntilPurged(
    _ box: Sandbox, _ plan: StorageState.PurgePlan, _ request: RequestThread,
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    let deadline = Clock.monotonic() + 10
    while !request.isSleeping, Clock.monotonic() < deadline { Clock.sleep(seconds: 0.001) }
    #expect(request.isSleeping, "the request sleeps while the purge is under way", sourceLocation: sourceLocation)
    #expect(!request.isFinished, sourceLocation: sourceLocation)
    box.fs.carryOut(plan, onRequestThread: false)
    #expect(request.finish(), "and returns once the purge is done", sourceLocation: sourceLocation)
  }

  @Test("an open of a file a purge is unlinking sleeps until the unlink, then answers ESTALE")
  func openWaits() throws {
    let (box, node, plan) = try Self.committedVictim("Library/Caches/f")
    let outcome = Outcome()
    let request = RequestThread { [fs = box.fs] in
      outcome.run { () throws(Errno) in _ = try fs.open(Sandbox.root, node: node, flags: O_RDONLY) }
    }
    Self.expectSleepsUntilPurged(box, plan, request)
    #expect(outcome.error == .stale)
    #expect(!box.backingHas("Library/Caches/f"))
    try box.expectExactBooks()
  }

  @Test("a link to a file a purge is unlinking sleeps until the unlink, then answers ESTALE; the books stay exact")
  func linkWaits() throws {
    let (box, node, plan) = try Self.committedVictim("Library/Caches/f")
    let caches = try box.lookup("Library/Caches")
    let outcome = Outcome()
    let request = RequestThread { [fs = box.fs] in
      outcome.run { () throws(Errno) in
        try FileName.withBytes(Array("second".utf8)) { (name) throws(Errno) in
          _ = try fs.link(Sandbox.root, node: node, newParent: caches, newName: name)
        }
      }
    }
    // Unwaited, the link lands between the purge's check of the file's single link and
    // its unlink: the file lives on under the new name with its bytes off the books.
    Self.expectSleepsUntilPurged(box, plan, request)
    #expect(outcome.error == .stale)
    #expect(!box.backingHas("Library/Caches/f") && !box.backingHas("Library/Caches/second"))
    try box.expectExactBooks()
  }

  @Test("a getattr of a file being unlinked by a purge sleeps until the unlink, then answers ESTALE")
  func getattrWaits() throws {
    let (box, node, plan) = try Self.committedVictim("Library/Caches/f")
    box.fs.inodes.inode(node).purged.store(true, ordering: .relaxed)  // as the purge marks it before its unlink
    let outcome = Outcome()
    let request = RequestThread { [fs = box.fs] in
      outcome.run { () throws(Errno) in _ = try fs.getattr(Sandbox.root, node: node, handle: nil) }
    }
    Self.expectSleepsUntilPurged(box, plan, request)
    #expect(outcome.error == .stale)
    try box.expectExactBooks()
  }

  @Test("a directory moving out of Caches waits for a purge committed to a file inside it")
  func domainMoveWaits() throws {
    let (box, _, plan) = try Self.committedVictim("Library/Caches/d/f")
    let (from, name) = try box.parent(of: "Library/Caches/d")
    let to = try box.lookup("Documents")
    let outcome = Outcome()
    let request = RequestThread { [fs = box.fs] in
      outcome.run { () throws(Errno) in
        try FileName.withBytes(name) { (name) throws(Errno) in
          try FileName.withBytes(Array("d".utf8)) { (newName) throws(Errno) in
            try fs.rename(Sandbox.root, parent: from, name: name, newParent: to, newName: newName, flags: 0)
          }
        }
      }
    }
    Self.expectSleepsUntilPurged(box, plan, request)
    #expect(outcome.finished && outcome.error == nil)
    #expect(box.backingHas("Documents/d"))
    try box.expectExactBooks()
  }
}

/// What a request on another thread ended with.
final class Outcome: Sendable {
  private let state = Mutex<(finished: Bool, error: Errno?)>((false, nil))

  /// Runs `request`, recording its error.
  func run(_ request: () throws(Errno) -> Void) {
    var failure: Errno?
    do throws(Errno) { try request() } catch { failure = error }
    state.withLock { $0 = (true, failure) }
  }

  var finished: Bool { state.withLock { $0.finished } }
  var error: Errno? { state.withLock { $0.error } }
}
