import FilesystemInterface
import Posix
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// Which writes name their range as stale pages the driver must drop before replying:
/// direct writes (an `O_DIRECT` handle, or `O_DIRECT` set on a cached one) of a file whose
/// page cache may hold pages (a read was served on a handle that is not passthrough);
/// never buffered writes, whose bytes the cache already holds, nor the kernel's writeback.
@Suite("Stale pages after direct writes")
struct StalePagesTests {
  /// A write request's bytes that came some way (`ByteWriteData` comes buffered).
  struct OriginWriteData: WriteData {
    let bytes: [UInt8]
    let origin: WriteOrigin
    var count: Int { bytes.count }
    func write(to fd: Int32, at offset: off_t, limit: Int?) throws(Errno) -> Int {
      try ByteWriteData(bytes: bytes).write(to: fd, at: offset, limit: limit)
    }
  }

  func write(_ box: Sandbox, _ file: (node: NodeID, handle: FileHandle), _ origin: WriteOrigin, at offset: off_t)
    throws(Errno) -> Written
  {
    let data = OriginWriteData(bytes: [UInt8](repeating: 7, count: 8192), origin: origin)
    return try box.fs.write(Sandbox.root, node: file.node, handle: file.handle, data: data, offset: offset)
  }

  @Test("a direct write names its range once the file's pages may be cached; other writes never do")
  func directWrites() throws {
    let box = try Sandbox()
    box.release(try box.create("Documents/f"))
    let direct = try box.open("Documents/f", flags: O_RDWR | Linux.openDirect)
    let cached = try box.open("Documents/f", flags: O_RDWR)
    // Nothing was read through the cache yet: nothing can be stale.
    #expect(try write(box, direct, .direct, at: 0) == Written(count: 8192))
    // A read on a cached handle: the kernel may now hold pages of the file.
    _ = try box.read(cached, count: 4096)
    #expect(try write(box, direct, .direct, at: 4096) == Written(count: 8192, stalePages: 4096..<12288))
    // A direct handle's writes are direct even without the flag (cleared with fcntl).
    #expect(try write(box, direct, .buffered, at: 100) == Written(count: 8192, stalePages: 100..<8292))
    // O_DIRECT set on a cached handle.
    #expect(try write(box, cached, .direct, at: 0) == Written(count: 8192, stalePages: 0..<8192))
    // A buffered write goes through the cache; writeback comes from it.
    #expect(try write(box, cached, .buffered, at: 0) == Written(count: 8192))
    #expect(try write(box, direct, .writeback, at: 0) == Written(count: 8192))
    #expect(try write(box, cached, .writeback, at: 0) == Written(count: 8192))
    box.release(direct)
    box.release(cached)
    try box.expectExactBooks()
  }

  @Test("a read on a direct handle marks the file too: a shared mapping of it reads through the cache")
  func readsOnDirectHandles() throws {
    let box = try Sandbox()
    box.release(try box.create("tmp/f"))
    let direct = try box.open("tmp/f", flags: O_RDWR | Linux.openDirect)
    _ = try write(box, direct, .direct, at: 0)
    _ = try box.read(direct, count: 4096)
    #expect(try write(box, direct, .direct, at: 0).stalePages == 0..<8192)
    box.release(direct)
    try box.expectExactBooks()
  }
}
