import FilesystemInterface
import Posix
import Synchronization
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// Names removed and made again at once, from several threads in one directory, while
/// the "kernel" forgets and looks up nodes in between, as under load: the inode table
/// must give each backing file one node id (the one it had, while the file is held or
/// retained), a new item a node of its own type, and count lookups exactly. Time-boxed;
/// the pass criteria are exact, whatever the machine's load.
@Suite("Name reuse under concurrency")
struct NameReuseStressTests {
  /// What one worker saw go wrong.
  struct Failure: CustomStringConvertible {
    let step: String
    let detail: String
    var description: String { "\(step): \(detail)" }
  }

  /// One worker's names in the shared directory, and the lookups it holds on each node
  /// (it plays the kernel: every lookup it is given, it forgets again).
  /// `@unchecked Sendable`: each worker is used by its one thread, then read after the join.
  final class Worker: @unchecked Sendable {
    let box: Sandbox
    let directory: NodeID
    let names: [[UInt8]]
    var held: [NodeID: UInt64] = [:]
    var failures: [Failure] = []
    /// The node each backing inode was first given while this worker kept it
    /// (held or retained), to check it keeps that id.
    var firstNode: [UInt64: NodeID] = [:]

    init(_ box: Sandbox, directory: NodeID, index: Int) {
      self.box = box
      self.directory = directory
      names = (0..<3).map { Array("w\(index)n\($0)".utf8) }
    }

    func fail(_ step: String, _ detail: String) { failures.append(Failure(step: step, detail: detail)) }

    /// Records an entry the filesystem gave (one more lookup) and checks its type and that
    /// the backing file kept its node id.
    @discardableResult
    func took(_ entry: Entry, _ step: String, type: mode_t) -> NodeID {
      held[entry.node, default: 0] += 1
      if entry.attributes.st_mode & S_IFMT != type {
        fail(step, "entry of type \(String(entry.attributes.st_mode & S_IFMT, radix: 8))")
      }
      // What the node's descriptor is: the inode table's view of it.
      if let st = try? box.fs.getattr(Sandbox.root, node: entry.node, handle: nil) {
        if st.st_mode & S_IFMT != type || st.st_ino != entry.attributes.st_ino {
          fail(
            step,
            "node \(entry.node.rawValue) is backing inode \(st.st_ino), type \(String(st.st_mode & S_IFMT, radix: 8))")
        }
      } else {
        fail(step, "getattr of the new node failed")
      }
      let ino = UInt64(entry.attributes.st_ino)
      // A forgotten node keeps its id only while the table retains it (root's daemon).
      if box.fs.inodes.retainedLimit > 0, let first = firstNode[ino], first != entry.node {
        fail(step, "backing inode \(ino) came back as node \(entry.node.rawValue), not \(first.rawValue)")
      }
      firstNode[ino] = entry.node
      return entry.node
    }

    /// Forgets every lookup this worker holds on `node` (the kernel evicts the inode).
    /// `deleted`: its file has no name left, so its backing inode may be reused.
    func forgetAll(_ node: NodeID, deleted: Bool = false) {
      if deleted { firstNode = firstNode.filter { $0.value != node } }
      guard let count = held.removeValue(forKey: node) else { return }
      box.fs.forget(node, count: count)
    }

    func name(_ index: Int, _ body: (FileName) throws(Errno) -> Void) throws(Errno) {
      try FileName.withBytes(names[index], body)
    }

    /// pjdfstest's link/unlink sequence for one special file, then a directory under the
    /// name just unlinked, with forgets and lookups in between.
    func round(_ type: mode_t, _ random: inout SeededGenerator) {
      let ctx = Sandbox.root
      var step = "mknod"
      do throws(Errno) {
        var special = NodeID(rawValue: 0)
        try name(0) { (n0) throws(Errno) in
          special = took(
            try box.fs.mknod(ctx, parent: directory, name: n0, mode: type | 0o644, device: 0), "mknod", type: type)
        }
        step = "link n0 n1"
        try name(1) { (n1) throws(Errno) in
          let linked = took(try box.fs.link(ctx, node: special, newParent: directory, newName: n1), step, type: type)
          if linked != special { fail(step, "a link is another node") }
        }
        step = "link n1 n2"
        try name(2) { (n2) throws(Errno) in
          took(try box.fs.link(ctx, node: special, newParent: directory, newName: n2), step, type: type)
        }
        if random.next() % 2 == 0 { forgetAll(special) }  // evicted while two names stay
        step = "unlink n0"
        try name(0) { (n0) throws(Errno) in try box.fs.unlink(ctx, parent: directory, name: n0) }
        step = "lookup n1"
        try name(1) { (n1) throws(Errno) in took(try box.fs.lookup(ctx, parent: directory, name: n1), step, type: type)
        }
        if random.next() % 2 == 0 { forgetAll(special) }
        step = "mkdir n0"
        var made = NodeID(rawValue: 0)
        try name(0) { (n0) throws(Errno) in
          made = took(try box.fs.mkdir(ctx, parent: directory, name: n0, mode: 0o755), step, type: S_IFDIR)
        }
        step = "unlink n2, n1"
        try name(2) { (n2) throws(Errno) in try box.fs.unlink(ctx, parent: directory, name: n2) }
        try name(1) { (n1) throws(Errno) in try box.fs.unlink(ctx, parent: directory, name: n1) }
        forgetAll(special, deleted: true)
        step = "rmdir n0"
        try name(0) { (n0) throws(Errno) in try box.fs.rmdir(ctx, parent: directory, name: n0) }
        forgetAll(made, deleted: true)
        step = "mknod n1 again"
        try name(1) { (n1) throws(Errno) in
          let again = took(
            try box.fs.mknod(ctx, parent: directory, name: n1, mode: type | 0o644, device: 0), step, type: type)
          try box.fs.unlink(ctx, parent: directory, name: n1)
          forgetAll(again, deleted: true)
        }
      } catch {
        fail(step, "\(error)")
        for index in 0..<3 {
          try? name(index) { (n) throws(Errno) in
            do throws(Errno) { try box.fs.unlink(ctx, parent: directory, name: n) } catch {
              try? box.fs.rmdir(ctx, parent: directory, name: n)
            }
          }
        }
        for node in Array(held.keys) { forgetAll(node, deleted: true) }
      }
    }
  }

  @Test(
    "special files with several links unlinked and their names made again, from four threads", .timeLimit(.minutes(10)))
  func specialFilesAndDirectories() throws {
    let box = try Sandbox()
    for domain in ["Documents", "tmp"] {
      let directory = try box.mkdir("\(domain)/shared")
      let workers = (0..<4).map { Worker(box, directory: directory, index: $0) }
      let rounds = Atomic<Int>(0)
      let heldBefore = box.fs.inodes.count
      let deadline = Clock.monotonic() + 2
      Threads.run(workers.count) { index in
        var random = SeededGenerator(seed: UInt64(index + 1))
        let types: [mode_t] = [S_IFSOCK, S_IFIFO, S_IFREG]
        var turn = 0
        while Clock.monotonic() < deadline {
          workers[index].round(types[turn % types.count], &random)
          turn += 1
          rounds.add(1, ordering: .relaxed)
        }
      }
      let failures = workers.flatMap(\.failures)
      #expect(failures.isEmpty, "\(domain): \(failures.prefix(10))")
      #expect(rounds.load(ordering: .relaxed) >= 4, "at least one round per worker")
      #expect(try box.list("\(domain)/shared").isEmpty)
      #expect(box.fs.inodes.count == heldBefore, "every node the workers were given is forgotten")
    }
    try box.expectExactBooks()
  }

  @Test(
    "a file looked up while its last lookup is being forgotten keeps its node id", .timeLimit(.minutes(10)),
    .enabled(if: geteuid() == 0, "retaining forgotten nodes needs CAP_DAC_READ_SEARCH"),
    arguments: [S_IFSOCK, S_IFREG])
  func lookupRacingForget(_ type: mode_t) throws {
    let box = try Sandbox()
    let directory = try box.mkdir("Documents/d")
    try #require(box.fs.inodes.retainedLimit > 0)
    let first = try FileName.withBytes(Array("f".utf8)) { (name) throws(Errno) in
      try box.fs.mknod(Sandbox.root, parent: directory, name: name, mode: type | 0o644, device: 0).node
    }
    box.fs.forget(first, count: 1)
    // Each thread looks the name up and forgets that lookup again, so the node is dropped
    // (and retained) and taken again over and over, often at once on two threads.
    let others = Mutex<Set<UInt64>>([])
    let rounds = Atomic<Int>(0)
    let deadline = Clock.monotonic() + 2
    let fs = box.fs
    Threads.run(4) { _ in
      while Clock.monotonic() < deadline {
        let node = FileName.withBytes(Array("f".utf8)) { name in
          try? fs.lookup(Sandbox.root, parent: directory, name: name).node
        }
        guard let node else { continue }
        if node != first { others.withLock { _ = $0.insert(node.rawValue) } }
        fs.forget(node, count: 1)
        rounds.add(1, ordering: .relaxed)
      }
    }
    #expect(
      others.withLock { $0 }.isEmpty,
      "node ids other than \(first.rawValue) after \(rounds.load(ordering: .relaxed)) lookups")
    #expect(rounds.load(ordering: .relaxed) > 100)
    #expect(box.fs.inodes.retainedCount == 1)
  }
}

/// Threads of the test's own (a dispatch queue would run no more at once than there are
/// CPUs).
enum Threads {
  /// Runs `body(i)` for each `i` in `0..<count` on a thread of its own and waits for all.
  static func run(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    var threads: [pthread_t] = []
    final class Box: @unchecked Sendable {  // handed to exactly one thread, which frees it
      let body: @Sendable (Int) -> Void
      let index: Int
      init(_ body: @escaping @Sendable (Int) -> Void, _ index: Int) {
        self.body = body
        self.index = index
      }
    }
    for index in 0..<count {
      var thread = pthread_t()
      let context = Unmanaged.passRetained(Box(body, index)).toOpaque()
      let created = pthread_create(
        &thread, nil,
        { context in
          let box = Unmanaged<Box>.fromOpaque(context!).takeRetainedValue()
          box.body(box.index)
          return nil
        }, context)
      precondition(created == 0, "pthread_create")
      threads.append(thread)
    }
    for thread in threads { pthread_join(thread, nil) }
  }
}
