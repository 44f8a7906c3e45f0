import CPosixShim
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// What a file handle (`name_to_handle_at`, which any user may call) tells about the
/// daemon: FUSE's handle is the node id and generation, so node ids must be opaque.
@Suite("File handles", .needsFUSE, .timeLimit(.minutes(10)))
struct FileHandleTests {
  /// The node id in the handle of `path`: FUSE encodes it as two 32-bit words, high first,
  /// then the generation.
  static func nodeID(of path: String) throws -> UInt64 {
    let capacity = 128
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: 8 + capacity, alignment: 8)
    defer { buffer.deallocate() }
    buffer.storeBytes(of: UInt32(capacity), as: UInt32.self)
    var mountID: Int32 = 0
    let result = cposix_name_to_handle_at(AT_FDCWD, path, buffer, &mountID, 0)
    guard result == 0 else { throw FixtureError("name_to_handle_at(\(path)): errno \(errno)") }
    let bytes = buffer.load(as: UInt32.self)
    guard bytes >= 12 else { throw FixtureError("a FUSE handle of \(bytes) bytes") }
    let words = buffer.advanced(by: 8)
    return UInt64(words.load(as: UInt32.self)) << 32 | UInt64(words.load(fromByteOffset: 4, as: UInt32.self))
  }

  @Test("a file handle holds no daemon address: node ids are small, distinct and not given out again")
  func nodeIDsAreOpaque() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    var seen = Set<UInt64>()
    for index in 0..<20 {
      let path = fixture.path("Documents/f\(index)")
      #expect(FileManager.default.createFile(atPath: path, contents: Data([1])))
      let node = try Self.nodeID(of: path)
      // A heap address on x86-64 and arm64 Linux is far above 2^40; a slot with its use
      // count is far below.
      #expect(node > 1 && node < 1 << 40, "node id \(String(node, radix: 16)) of \(path) looks like an address")
      #expect(seen.insert(node).inserted, "node id \(node) given out twice")
      #expect(unlink(path) == 0)
    }
    try fixture.unmount()
  }
}
