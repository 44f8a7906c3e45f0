import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// The filesystem's side of the kernel's writeback cache (`--write-cache`): which writers
/// get a handle through it, what the backing descriptor is opened with, write-back that
/// fits whole or not at all, and the gate on writers whose file changed to a class that
/// can refuse (docs/architecture.md, "Small writes").
@Suite("The writeback cache through the protocol")
struct WriteCacheTests {
  /// A write request's bytes as the kernel writes back cached pages.
  struct WriteBack: WriteData {
    let bytes: [UInt8]
    var origin: WriteOrigin { .writeback }
    var count: Int { bytes.count }
    func write(to fd: Int32, at offset: off_t, limit: Int?) throws(Errno) -> Int {
      try ByteWriteData(bytes: bytes).write(to: fd, at: offset, limit: limit)
    }
  }

  /// A kernel whose writeback cache holds at most 1 MiB unwritten.
  static let driver = InMemoryDriver(writeCache: WriteCache(dirtyLimit: 1 << 20))

  static func kind(_ handle: FileHandle) -> HandleKind { HandleKind(handle: handle) }

  /// The open file status flags of a handle's backing descriptor.
  static func backingFlags(_ handle: FileHandle) -> Int32 {
    fcntl(Int32(truncatingIfNeeded: handle.rawValue), F_GETFL)
  }

  func writeBack(_ box: Sandbox, _ file: (node: NodeID, handle: FileHandle), _ count: Int, at offset: off_t)
    throws(Errno) -> Int
  {
    try box.fs.write(
      Sandbox.root, node: file.node, handle: file.handle, data: WriteBack(bytes: [UInt8](repeating: 9, count: count)),
      offset: offset
    ).count
  }

  @Test(
    "a writer of a class that never refuses gets the cache; its backing file is opened read-write, without O_APPEND")
  func writersUseTheCache() throws {
    let box = try Sandbox(driver: Self.driver)
    box.release(try box.create("Documents/log"))
    let appender = try box.open("Documents/log", flags: O_WRONLY | O_APPEND)
    #expect(Self.kind(appender.handle) == .writeback)
    #expect(Self.backingFlags(appender.handle) & O_ACCMODE == O_RDWR, "the kernel may fill partial pages through it")
    #expect(Self.backingFlags(appender.handle) & O_APPEND == 0, "the kernel places appends itself")
    let reader = try box.open("Documents/log")
    #expect(Self.kind(reader.handle) == .cached)
    let direct = try box.open("Documents/log", flags: O_RDWR | Linux.openDirect)
    #expect(Self.kind(direct.handle) == .direct)
    #expect(box.fs.writebackWriters.load(ordering: .relaxed) == 1)
    for file in [appender, reader, direct] { box.release(file) }
    #expect(box.fs.writebackWriters.load(ordering: .relaxed) == 0)
    // Without the cache, O_APPEND and write-only stay as the program asked, and a
    // write-only handle writes past the page cache.
    let plain = try Sandbox()
    plain.release(try plain.create("Documents/log"))
    let unchanged = try plain.open("Documents/log", flags: O_WRONLY | O_APPEND)
    #expect(Self.kind(unchanged.handle) == .direct)
    #expect(Self.backingFlags(unchanged.handle) & (O_ACCMODE | O_APPEND) == O_WRONLY | O_APPEND)
    plain.release(unchanged)
  }

  @Test("a backup's write-back request invalidates the files with cached writers, and only those")
  func writeBackForBackup() throws {
    let box = try Sandbox(driver: Self.driver)
    let writer = try box.create("Documents/log")
    box.release(try box.create("Documents/other"))
    let reader = try box.open("Documents/other")
    #expect(Self.kind(writer.handle) == .writeback && Self.kind(reader.handle) == .cached)
    let before = box.notifier.calls.count
    #expect(box.fs.writeBackCachedWrites() == 1)
    #expect(Array(box.notifier.calls.dropFirst(before)) == [.invalidateInode(writer.node)])
    box.release(writer)
    box.release(reader)
    #expect(box.fs.writeBackCachedWrites() == 0, "no writer left")
    // Without the cache there is nothing the kernel holds.
    let plain = try Sandbox()
    let plainWriter = try plain.create("Documents/log")
    #expect(plain.fs.writeBackCachedWrites() == 0)
    plain.release(plainWriter)
  }

  @Test(
    "writers of a class that can refuse later get direct handles; its readers keep the cache",
    arguments: [ProtectionClass.complete, .completeWhenUserInactive])
  func refusableClassesWriteDirect(_ protectionClass: ProtectionClass) throws {
    let box = try Sandbox(driver: Self.driver)
    _ = try box.mkdir("Documents/secret")
    try box.setxattr("Documents/secret", "user.appbox.protection", protectionClass.name)
    let created = try box.create("Documents/secret/f")
    #expect(Self.kind(created.handle) == .direct)
    box.release(created)
    let writer = try box.open("Documents/secret/f", flags: O_WRONLY)
    #expect(Self.kind(writer.handle) == .direct)
    let reader = try box.open("Documents/secret/f")
    #expect(Self.kind(reader.handle) == .cached)
    box.release(writer)
    box.release(reader)
  }

  @Test("a writer gets a direct handle while less than the kernel may hold unwritten is free")
  func nearlyFullWritesDirect() throws {
    let box = try Sandbox(capacity: 4 << 20, driver: Self.driver)
    box.release(try box.create("Documents/f"))
    let roomy = try box.open("Documents/f", flags: O_RDWR)
    #expect(Self.kind(roomy.handle) == .writeback)
    box.release(roomy)
    try box.makeFile("Documents/big", bytes: 3 << 20 + 512 << 10)  // leaves less than 1 MiB
    let tight = try box.open("Documents/f", flags: O_RDWR)
    #expect(Self.kind(tight.handle) == .direct)
    box.release(tight)
    try box.expectExactBooks()
  }

  @Test("a write-back fits whole or is ENOSPC (the kernel takes no partial one); a program's write is shortened")
  func writeBackIsWhole() throws {
    let box = try Sandbox(capacity: 2 << 20)
    let file = try box.create("Documents/f")
    let free = box.fs.storage.books.withLock { $0.ledger.free }
    let before = box.used
    #expect(throws: Errno.noSpace) { try writeBack(box, file, Int(free) + (64 << 10), at: 0) }
    #expect(try Sys.statPath(box.backing + "/Documents/f").st_size == 0, "nothing was written")
    #expect(box.used == before)
    let shortened = try box.write(file, [UInt8](repeating: 1, count: Int(free) + (64 << 10)))
    #expect(shortened > 0 && shortened < Int(free) + (64 << 10))
    box.release(file)
    try box.expectExactBooks()
  }

  @Test("a write into a hole is reserved whole: writes out of file order never take the books past the capacity")
  func holesAreReserved() throws {
    let box = try Sandbox(capacity: 4 << 20)
    let file = try box.create("Documents/f")
    // The second half first, as a later write-back worker may send it.
    #expect(try writeBack(box, file, 1 << 20, at: 1 << 20) == 1 << 20)
    try box.makeFile("Documents/filler", bytes: 2 << 20)  // leaves less than 1 MiB
    let free = box.fs.storage.books.withLock { $0.ledger.free }
    #expect(free < 1 << 20)
    // The first half falls into the hole below the file's end: it needs all its bytes.
    #expect(throws: Errno.noSpace) { try writeBack(box, file, 1 << 20, at: 0) }
    let written = try box.write(file, [UInt8](repeating: 1, count: 1 << 20))
    #expect(written > 0 && written < 1 << 20, "a program's write into the hole is shortened")
    box.release(file)
    #expect(box.used <= 4 << 20)
    try box.expectExactBooks()
  }

  @Test("a class changed to A while a writer holds the cache gates its writes until the writer is gone")
  func classChangeGatesWriters() throws {
    let box = try Sandbox(driver: Self.driver)
    box.release(try box.create("Documents/f"))
    let writer = try box.open("Documents/f", flags: O_RDWR)
    #expect(Self.kind(writer.handle) == .writeback)
    #expect(box.fs.cachesAttributes(of: writer.node))
    try box.setxattr("Documents/f", "user.appbox.protection", ProtectionClass.complete.name)
    // The kernel drops the attributes it has and keeps none from now on: it asks, handle
    // in hand, before each write through the cache.
    #expect(box.notifier.calls.contains(.invalidateAttributes(writer.node)))
    #expect(!box.fs.cachesAttributes(of: writer.node))
    _ = try box.fs.getattr(Sandbox.root, node: writer.node, handle: writer.handle)  // unlocked: allowed
    #expect(box.fs.lock() == .locked)
    #expect(throws: Errno.notPermitted) {
      try box.fs.getattr(Sandbox.root, node: writer.node, handle: writer.handle)
    }
    _ = try box.fs.getattr(Sandbox.root, node: writer.node, handle: nil)  // a stat is never refused
    #expect(throws: Errno.notPermitted) { try writeBack(box, writer, 4096, at: 0) }
    #expect(box.events("refusal").count == 2)
    #expect(box.fs.unlock() == .unlocked)
    box.release(writer)
    #expect(box.fs.cachesAttributes(of: writer.node), "no writer through the cache is left")
    try box.expectExactBooks()
  }

  @Test("a class changed back to one that never refuses opens the gate; a reader's handle is never gated")
  func classChangedBack() throws {
    let box = try Sandbox(driver: Self.driver)
    box.release(try box.create("Documents/f"))
    let writer = try box.open("Documents/f", flags: O_RDWR)
    let reader = try box.open("Documents/f")
    try box.setxattr("Documents/f", "user.appbox.protection", ProtectionClass.complete.name)
    #expect(!box.fs.cachesAttributes(of: writer.node))
    try box.setxattr("Documents/f", "user.appbox.protection", ProtectionClass.none.name)
    #expect(box.fs.cachesAttributes(of: writer.node))
    try box.setxattr("Documents/f", "user.appbox.protection", ProtectionClass.complete.name)
    #expect(box.fs.lock() == .locked)
    _ = try box.fs.getattr(Sandbox.root, node: reader.node, handle: reader.handle)
    #expect(box.fs.unlock() == .unlocked)
    box.release(writer)
    box.release(reader)
  }

  /// A kernel that writes a file's dirty pages back while it invalidates it, as
  /// `notify_inval_inode` does.
  final class FlushingNotifier: KernelNotifier {
    let flush: Mutex<(@Sendable (NodeID) -> Void)?> = Mutex(nil)
    let results = Mutex<[Result<Int, Errno>]>([])
    func invalidateEntry(parent: NodeID, name: [UInt8]) -> Int32 { 0 }
    func delete(parent: NodeID, child: NodeID, name: [UInt8]) -> Int32 { 0 }
    func invalidateInode(_ node: NodeID, offset: Int64, length: Int64) -> Int32 {
      if offset >= 0, let flush = flush.withLock({ $0 }) { flush(node) }
      return 0
    }
  }

  @Test("at a lock, the pages the kernel writes back for a gated file are stored; after it, write-back is refused")
  func lockFlushesWrittenPages() throws {
    let box = try Sandbox(driver: Self.driver)
    box.release(try box.create("Documents/f"))
    let writer = try box.open("Documents/f", flags: O_RDWR)
    try box.setxattr("Documents/f", "user.appbox.protection", ProtectionClass.complete.name)
    let notifier = FlushingNotifier()
    let fs = box.fs
    notifier.flush.withLock { flush in
      flush = { node in
        let result = Result { () throws(Errno) -> Int in
          try fs.write(
            Sandbox.root, node: node, handle: writer.handle, data: WriteBack(bytes: [UInt8](repeating: 5, count: 8192)),
            offset: 0
          ).count
        }
        notifier.results.withLock { $0.append(result) }
      }
    }
    box.fs.notifier.withLock { $0 = notifier }
    #expect(box.fs.lock() == .locked)
    #expect(notifier.results.withLock { $0.map { try? $0.get() } } == [8192], "written before the lock: stored")
    #expect(try Sys.statPath(box.backing + "/Documents/f").st_size == 8192)
    #expect(throws: Errno.notPermitted) { try writeBack(box, writer, 4096, at: 0) }
    #expect(box.fs.unlock() == .unlocked)
    box.release(writer)
    try box.expectExactBooks()
  }
}
