import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A read-write handle that joins passthrough handles gets the kernel's passthrough mmap:
/// a mapping of the backing file, which fills holes below the file's end without a request
/// to the daemon, and outlives the handle. So such a file never has holes: a reader gets
/// passthrough only on a file without them, and while passthrough handles are open (or
/// once a read-write handle joined them) what would leave a hole allocates it, within the
/// quota (docs/architecture.md, "Passthrough and the quota"). Whether the kernel's mapping
/// then stays within the capacity is for the mount test
/// (QuotaHardeningTests.passthroughWriterMappingStaysInQuota).
@Suite(
  "Holes in files the kernel may map through passthrough",
  .enabled(if: PassthroughSupport.enabled, "needs fanotify's permission events (CAP_SYS_ADMIN)"))
struct PassthroughHoleTests {
  /// A sandbox of 8 MiB with a stand-in for the kernel's passthrough, and a 4 KiB file
  /// `Documents/f` without holes.
  static func sandbox() throws -> Sandbox {
    let box = try Sandbox(capacity: 8 << 20, driver: InMemoryDriver(passthrough: RecordingPassthrough()))
    try box.writeFile("Documents/f", pattern(4096))
    return box
  }

  /// `open` of `path`: the file, and whether the reply is passthrough.
  static func open(_ box: Sandbox, _ path: String = "Documents/f", flags: Int32) throws -> (OpenFile, Bool) {
    let node = try box.lookup(path)
    let opened = try box.fs.open(Sandbox.root, node: node, flags: flags)
    return ((node, opened.handle), opened.backing != nil)
  }

  /// The backing file's allocated bytes.
  static func allocated(_ box: Sandbox, _ path: String = "Documents/f") throws -> Int64 {
    Int64(try box.backingStat(path).st_blocks) * 512
  }

  @Test("a file with holes below its end is not opened for passthrough; one without, or an empty one, is")
  func sparseFilesAreNotPassthrough() throws {
    let box = try Self.sandbox()
    try box.writeFile("Documents/sparse", pattern(4096))
    try box.truncate("Documents/sparse", to: 1 << 20)
    box.release(try box.create("Documents/empty"))
    var opened: [String: Bool] = [:]
    var held: [OpenFile] = []
    for path in ["Documents/f", "Documents/sparse", "Documents/empty"] {
      let (file, passthrough) = try Self.open(box, path, flags: O_RDONLY)
      opened[path] = passthrough
      held.append(file)
    }
    #expect(opened == ["Documents/f": true, "Documents/sparse": false, "Documents/empty": true])
    for file in held { box.release(file) }
    try box.expectExactBooks()
  }

  @Test(
    "a read-write handle joined to a passthrough reader: a truncate up is allocated within the quota, also by path after the release"
  )
  func joinedWriterTruncateIsAllocated() throws {
    let box = try Self.sandbox()
    let (reader, readerPassthrough) = try Self.open(box, flags: O_RDONLY)
    let (writer, writerPassthrough) = try Self.open(box, flags: O_RDWR)
    #expect(readerPassthrough && writerPassthrough)
    #expect(throws: Errno.noSpace) { try box.truncate(writer, to: 64 << 20) }
    #expect(try box.getattr("Documents/f").st_size == 4096, "the size is unchanged")
    try box.truncate(writer, to: 4 << 20)
    #expect(try Self.allocated(box) >= 4 << 20, "the growth is allocated, not a hole")
    #expect(try box.read(writer, count: 4, at: 2 << 20) == [0, 0, 0, 0])
    box.release(writer)
    box.release(reader)
    try box.expectExactBooks()
    // A mapping made through the writer outlives it: a truncate by path, with nothing
    // open, is allocated too.
    #expect(throws: Errno.noSpace) { try box.truncate("Documents/f", to: 64 << 20) }
    try box.truncate("Documents/f", to: 6 << 20)
    #expect(try Self.allocated(box) >= 6 << 20)
    try box.expectExactBooks()
    // Once its last name is gone with nothing open, nothing reaches it again.
    #expect(box.fs.writeMapped.count == 1)
    try box.unlink("Documents/f")
    #expect(box.fs.writeMapped.count == 0)
    try box.expectExactBooks()
  }

  @Test("a writer that opens first and a reader after it: neither is passthrough, and a truncate up stays a hole")
  func writerFirstStaysSparse() throws {
    let box = try Self.sandbox()
    let (writer, writerPassthrough) = try Self.open(box, flags: O_RDWR)
    let (reader, readerPassthrough) = try Self.open(box, flags: O_RDONLY)
    #expect(!writerPassthrough && !readerPassthrough)
    try box.truncate(writer, to: 64 << 20)
    #expect(
      try Self.allocated(box) < 1 << 20, "sparse: its mapping is the page cache's, written back through the daemon")
    box.release(reader)
    box.release(writer)
    #expect(box.fs.writeMapped.count == 0)
    try box.expectExactBooks()
  }

  @Test("a truncate up by path while only readers are passthrough is allocated; once they are closed it is a hole")
  func truncateByPathWhileReadersAreOpen() throws {
    let box = try Self.sandbox()
    let (reader, passthrough) = try Self.open(box, flags: O_RDONLY)
    #expect(passthrough)
    #expect(throws: Errno.noSpace) { try box.truncate("Documents/f", to: 64 << 20) }
    try box.truncate("Documents/f", to: 2 << 20)
    #expect(try Self.allocated(box) >= 2 << 20)
    box.release(reader)
    // No read-write handle joined: nothing can map the backing file any more.
    try box.truncate("Documents/f", to: 64 << 20)
    #expect(try Self.allocated(box) < 4 << 20)
    let (again, passthroughAgain) = try Self.open(box, flags: O_RDONLY)
    #expect(!passthroughAgain, "it has a hole now")
    box.release(again)
    try box.expectExactBooks()
  }

  @Test("while a change that may leave holes is under way, a read-only open is not passthrough; once it is done, it is")
  func noRegistrationWhileHolesAreMade() throws {
    let box = try Self.sandbox()
    let node = try box.lookup("Documents/f")
    let inode = box.fs.inodes.inode(node)
    // A truncate by path runs its change inside this (``changingExtent``); a reader that
    // registered before the hole is made would never see it.
    let (fill, during) = try box.fs.changingExtent(inode) { (fill) throws(Errno) -> (Bool, OpenedFile) in
      (fill, try box.fs.open(Sandbox.root, node: node, flags: O_RDONLY))
    }
    #expect(!fill, "nothing is passthrough yet: the change need not fill")
    #expect(during.backing == nil)
    box.release((node, during.handle))
    let (after, passthrough) = try Self.open(box, flags: O_RDONLY)
    #expect(passthrough)
    box.release(after)
  }

  @Test("writes and copies past the end of a joined writer's file allocate the gap, within the quota")
  func writesPastTheEndFillTheGap() throws {
    let box = try Self.sandbox()
    try box.writeFile("Documents/source", pattern(8192, seed: 3))
    let (reader, _) = try Self.open(box, flags: O_RDONLY)
    let (writer, passthrough) = try Self.open(box, flags: O_RDWR)
    let (source, _) = try Self.open(box, "Documents/source", flags: O_RDONLY)
    #expect(passthrough)
    #expect(throws: Errno.noSpace) { try box.write(writer, pattern(4096), at: 64 << 20) }
    #expect(try box.getattr("Documents/f").st_size == 4096, "nothing written")
    #expect(try box.write(writer, pattern(4096, seed: 2), at: 1 << 20) == 4096)
    #expect(try Self.allocated(box) >= (1 << 20) + 4096)
    #expect(try box.copy(from: source, at: 0, to: writer, at: 3 << 20, count: 8192) == 8192)
    #expect(try Self.allocated(box) >= (3 << 20) + 8192)
    #expect(try box.read(writer, count: 8192, at: 3 << 20) == pattern(8192, seed: 3))
    box.release(source)
    box.release(writer)
    box.release(reader)
    try box.expectExactBooks()
  }

  @Test(
    "fallocate of a joined writer's file leaves no hole: a punch zeroes, an insert is refused, an allocation past the end fills the gap"
  )
  func fallocateLeavesNoHole() throws {
    let box = try Self.sandbox()
    let (reader, _) = try Self.open(box, flags: O_RDONLY)
    let (writer, passthrough) = try Self.open(box, flags: O_RDWR)
    #expect(passthrough)
    try box.truncate(writer, to: 1 << 20)
    _ = try box.write(writer, pattern(1 << 20, seed: 4))
    let before = try Self.allocated(box)
    try box.fallocate(writer, mode: Linux.fallocPunchHole | Linux.fallocKeepSize, offset: 0, length: 65536)
    #expect(try box.read(writer, count: 65536) == [UInt8](repeating: 0, count: 65536), "the range reads as zeros")
    #expect(try Self.allocated(box) >= before, "its blocks stay allocated")
    #expect(throws: Errno.notSupported) {
      try box.fallocate(writer, mode: Linux.fallocInsertRange, offset: 0, length: 65536)
    }
    try box.fallocate(writer, offset: 3 << 20, length: 4096)
    #expect(try box.getattr("Documents/f").st_size == (3 << 20) + 4096)
    #expect(try Self.allocated(box) >= (3 << 20) + 4096, "the gap is allocated")
    #expect(throws: Errno.noSpace) { try box.fallocate(writer, offset: 64 << 20, length: 4096) }
    box.release(writer)
    box.release(reader)
    try box.expectExactBooks()
  }

  @Test("two read-write handles joined: both are held to the quota; a write-only one does not outlast its release")
  func twoWritersAndAWriteOnlyOne() throws {
    let box = try Self.sandbox()
    let (reader, _) = try Self.open(box, flags: O_RDONLY)
    let (first, _) = try Self.open(box, flags: O_RDWR)
    let (second, _) = try Self.open(box, flags: O_RDWR)
    #expect(throws: Errno.noSpace) { try box.truncate(second, to: 64 << 20) }
    try box.truncate(first, to: 2 << 20)
    box.release(first)
    try box.truncate(second, to: 4 << 20)
    #expect(try Self.allocated(box) >= 4 << 20)
    box.release(second)
    box.release(reader)
    try box.expectExactBooks()

    // A write-only handle cannot map the file: once it and the reader are closed, a
    // truncate up is a hole again.
    try box.writeFile("Documents/w", pattern(4096))
    let (wReader, _) = try Self.open(box, "Documents/w", flags: O_RDONLY)
    let (wWriter, joined) = try Self.open(box, "Documents/w", flags: O_WRONLY)
    #expect(joined)
    #expect(throws: Errno.noSpace) { try box.truncate(wWriter, to: 64 << 20) }
    box.release(wWriter)
    box.release(wReader)
    try box.truncate("Documents/w", to: 64 << 20)
    #expect(try Self.allocated(box, "Documents/w") < 1 << 20)
    try box.expectExactBooks()
  }
}
