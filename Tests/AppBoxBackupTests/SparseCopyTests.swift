import Posix
import TestSupport
import Testing

@testable import AppBoxBackup

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Sparse copies: data copied, holes left holes")
struct SparseCopyTests {
  /// A file of `size` bytes holding `extents` (offset, bytes), holes elsewhere.
  static func sparseFile(_ path: String, size: Int64, _ extents: [(Int64, [UInt8])]) throws -> Int32 {
    let fd = try Sys.open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
    for (offset, bytes) in extents {
      _ = try bytes.withUnsafeBytes { (buffer) throws(Errno) in try Sys.pwrite(fd, buffer, off_t(offset)) }
    }
    try Sys.ftruncate(fd, off_t(size))
    return fd
  }

  static func read(_ fd: Int32, at offset: Int64, count: Int) throws -> [UInt8] {
    var buffer = [UInt8](repeating: 0xAA, count: count)
    let read = try buffer.withUnsafeMutableBytes { (raw) throws(Errno) in try Sys.pread(fd, raw, off_t(offset)) }
    return Array(buffer[..<read])
  }

  @Test("a 64 MiB file with three extents copies as three extents: the same bytes, the same holes")
  func sparse() throws {
    let scratch = try Scratch()
    let size: Int64 = 64 << 20
    let extents: [(Int64, [UInt8])] = [
      (0, pattern(4096, seed: 1)), (32 << 20, pattern(65536, seed: 2)), (size - 4096, pattern(4096, seed: 3)),
    ]
    let source = try Self.sparseFile(scratch("source"), size: size, extents)
    defer { Sys.close(source) }
    #expect(try SparseCopy.dataBytes(source, count: size) == 4096 + 65536 + 4096)
    let out = try Sys.open(scratch("copy"), O_RDWR | O_CREAT | O_EXCL, 0o600)
    defer { Sys.close(out) }
    let result = try SparseCopy.copy(from: source, to: out, count: size)
    #expect(result == SparseCopy.Result(covered: size, data: 4096 + 65536 + 4096))
    let copy = try Sys.fstat(out)
    #expect(copy.st_size == size)
    #expect(Int64(copy.st_blocks) * 512 <= 1 << 20, "the copy allocates \(copy.st_blocks * 512) bytes")
    for (offset, bytes) in extents { #expect(try Self.read(out, at: offset, count: bytes.count) == bytes) }
    #expect(try Self.read(out, at: 16 << 20, count: 4096) == [UInt8](repeating: 0, count: 4096))
    #expect(try SparseCopy.dataBytes(out, count: size) == result.data)
  }

  @Test("a file without holes copies whole; a prefix copies only its bytes; an empty file copies empty")
  func plainFiles() throws {
    let scratch = try Scratch()
    let bytes = pattern(300_000, seed: 4)
    try Scratch.write(scratch("plain"), bytes)
    let source = try Sys.open(scratch("plain"), O_RDONLY)
    defer { Sys.close(source) }
    let allocated = Int64(try Sys.fstat(source).st_blocks) * 512
    for (name, count) in [("whole", Int64(bytes.count)), ("prefix", 100_000), ("empty", 0)] {
      // Looking for holes, and (the file being as allocated as it is long) not looking.
      for hint in [nil, allocated] {
        let copy = scratch(name + (hint == nil ? "-sought" : "-dense"))
        let out = try Sys.open(copy, O_RDWR | O_CREAT | O_EXCL, 0o600)
        defer { Sys.close(out) }
        let result = try SparseCopy.copy(from: source, to: out, count: count, allocated: hint)
        #expect(result == SparseCopy.Result(covered: count, data: count), "\(copy)")
        #expect(try Scratch.read(copy) == Array(bytes.prefix(Int(count))), "\(copy)")
      }
    }
  }

  @Test("a source that ends sooner than asked: the copy covers what there was")
  func shorterSource() throws {
    let scratch = try Scratch()
    try Scratch.write(scratch("short"), pattern(5000, seed: 5))
    let source = try Sys.open(scratch("short"), O_RDONLY)
    defer { Sys.close(source) }
    let out = try Sys.open(scratch("copy"), O_RDWR | O_CREAT | O_EXCL, 0o600)
    defer { Sys.close(out) }
    let result = try SparseCopy.copy(from: source, to: out, count: 8192)
    #expect(result.data == 5000)
    #expect(result.covered == 5000 || result.covered == 8192)
    #expect(try Sys.fstat(out).st_size == result.covered)
  }

  @Test("a copy writes no more data than its limit: the run that would go over it is not written; one within it copies")
  func dataLimit() throws {
    let scratch = try Scratch()
    let size: Int64 = 8 << 20
    let extents: [(Int64, [UInt8])] = [(0, pattern(4096, seed: 6)), (4 << 20, pattern(1 << 20, seed: 7))]
    let source = try Self.sparseFile(scratch("source"), size: size, extents)
    defer { Sys.close(source) }
    let measure = try SparseCopy.measure(source, count: size, blockSize: 4096)
    #expect(measure == SparseCopy.Measure(data: 4096 + (1 << 20), blocks: 1 + 256, extents: 2))
    for (limit, over) in [(Int64(4096 + (1 << 20)), false), (4096 + (1 << 20) - 1, true), (0, true)] {
      let out = try Sys.open(scratch("copy-\(limit)"), O_RDWR | O_CREAT | O_EXCL, 0o600)
      defer { Sys.close(out) }
      let result = try SparseCopy.copy(from: source, to: out, count: size, dataLimit: limit)
      #expect(result.overLimit == over, "limit \(limit)")
      #expect(result.data <= limit, "limit \(limit)")
      #expect(Int64(try Sys.fstat(out).st_blocks) * 512 <= max(limit, 0) + 4096, "limit \(limit)")
    }
    // Dense: the same bound without seeking.
    try Scratch.write(scratch("dense"), pattern(100_000, seed: 8))
    let dense = try Sys.open(scratch("dense"), O_RDONLY)
    defer { Sys.close(dense) }
    let out = try Sys.open(scratch("dense-copy"), O_RDWR | O_CREAT | O_EXCL, 0o600)
    defer { Sys.close(out) }
    let result = try SparseCopy.copy(from: dense, to: out, count: 100_000, allocated: 1 << 20, dataLimit: 50_000)
    #expect(result.overLimit && result.data == 0)
  }
}
