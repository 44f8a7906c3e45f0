import Foundation
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Large files and concurrent writers.
@Suite("Scale", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct ScaleTests {
  /// Chunk `index` of a deterministic stream: a fixed random block with the chunk index
  /// stamped every 4 KiB, so a misplaced or repeated chunk is detected.
  static func chunk(_ index: Int, base: [UInt8]) -> [UInt8] {
    var block = base
    block.withUnsafeMutableBytes { raw in
      for offset in stride(from: 0, to: raw.count, by: 4096) {
        raw.storeBytes(of: UInt64(index).littleEndian, toByteOffset: offset, as: UInt64.self)
      }
    }
    return block
  }

  @Test("a 1 GiB file written and read back in 1 MiB chunks, checksummed against the backing file")
  func oneGiB() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/big")
    let chunkSize = 1 << 20
    let chunks = 1024
    let base = pattern(chunkSize, seed: 42)
    let fd = try openFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    for index in 0..<chunks { try writeAll(fd, Self.chunk(index, base: base)) }
    #expect(close(fd) == 0)
    #expect(try statPath(path).st_size == off_t(chunks * chunkSize))
    let input = try openFile(path, O_RDONLY)
    var mismatches: [Int] = []
    var buffer = [UInt8](repeating: 0, count: chunkSize)
    for index in 0..<chunks {
      var done = 0
      while done < chunkSize {
        let n = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress! + done, chunkSize - done) }
        try check(n, "read chunk \(index)")
        if n == 0 { break }
        done += n
      }
      let expected = Self.chunk(index, base: base)
      if done != chunkSize || memcmp(buffer, expected, chunkSize) != 0 { mismatches.append(index) }
    }
    var extra: UInt8 = 0
    #expect(read(input, &extra, 1) == 0, "data past 1 GiB")
    close(input)
    #expect(mismatches.isEmpty, "chunks differ: \(mismatches.prefix(10))")
    // The same checksum through the mount and in the backing dir.
    let sums = try Command.shell(
      "sha256sum " + shellQuote(path) + " " + shellQuote(fixture.backingPath("Documents/big")) + " | cut -d' ' -f1"
    )
    .split(separator: "\n")
    #expect(sums.count == 2)
    #expect(sums.first == sums.last)
    #expect(unlink(path) == 0)
    try fixture.unmount()
  }

  @Test("a file larger than 4 GiB: a write past 4 GiB lands at the right offset")
  func beyondFourGiB() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Library/Caches/huge-sparse")
    let fd = try openFile(path, O_RDWR | O_CREAT, 0o644)
    let offset = off_t(5) << 30 + 123
    try writeAll(fd, bytes("far away"), at: offset)
    #expect(try fstatFD(fd).st_size == offset + 8)
    #expect(try readAt(fd, count: 8, offset: offset) == bytes("far away"))
    #expect(try statPath(fixture.backingPath("Library/Caches/huge-sparse")).st_size == offset + 8)
    close(fd)
    try fixture.unmount()
  }

  @Test("8 threads write interleaved regions of one file; every region reads back intact")
  func concurrentRegions() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/shared")
    let threads = 8
    let region = 1 << 20
    let piece = 64 * 1024
    let fd = try openFile(path, O_RDWR | O_CREAT, 0o644)
    let failures = Mutex<[String]>([])
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
      let data = pattern(region, seed: UInt64(100 + thread))
      // Pieces are interleaved across threads: piece p of thread t at (p * threads + t) * piece.
      for p in 0..<(region / piece) {
        let offset = off_t((p * threads + thread) * piece)
        let n = data.withUnsafeBytes { pwrite(fd, $0.baseAddress! + p * piece, piece, offset) }
        if n != piece { failures.withLock { $0.append("thread \(thread) piece \(p): \(n) errno \(errno)") } }
      }
    }
    #expect(failures.withLock { $0 }.isEmpty)
    #expect(try fstatFD(fd).st_size == off_t(threads * region))
    let content = try readAt(fd, count: threads * region, offset: 0)
    for thread in 0..<threads {
      let data = pattern(region, seed: UInt64(100 + thread))
      var intact = true
      for p in 0..<(region / piece) {
        let offset = (p * threads + thread) * piece
        if content[offset..<(offset + piece)].elementsEqual(data[(p * piece)..<((p + 1) * piece)]) == false {
          intact = false
        }
      }
      #expect(intact, "thread \(thread)'s pieces differ")
    }
    close(fd)
    #expect(try readFile(fixture.backingPath("Documents/shared")) == content)
    try fixture.unmount()
  }

  @Test("8 threads each write their own file through separate descriptors; contents intact")
  func concurrentFiles() throws {
    let fixture = try MountFixture.unlocked()
    let threads = 8
    let size = 2 << 20
    let failures = Mutex<[String]>([])
    let caches = fixture.path("Library/Caches")
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
      do {
        let data = pattern(size, seed: UInt64(200 + thread))
        let fd = try openFile(caches + "/file-\(thread)", O_WRONLY | O_CREAT | O_EXCL, 0o644)
        var offset = 0
        while offset < size {
          let piece = min(37 * 1024, size - offset)  // odd-sized writes
          try writeAll(fd, Array(data[offset..<(offset + piece)]))
          offset += piece
        }
        try check(close(fd), "close")
        if try readFile(caches + "/file-\(thread)") != data {
          failures.withLock { $0.append("file-\(thread) differs right after writing") }
        }
      } catch {
        failures.withLock { $0.append("thread \(thread): \(error)") }
      }
    }
    #expect(failures.withLock { $0 }.isEmpty)
    for thread in 0..<threads {
      #expect(
        try readFile(fixture.backingPath("Library/Caches/file-\(thread)")) == pattern(size, seed: UInt64(200 + thread)),
        "file-\(thread)")
    }
    try fixture.unmount()
  }

  @Test("concurrent creates, stats and unlinks in one directory from 4 threads keep the directory consistent")
  func concurrentMetadata() throws {
    let fixture = try MountFixture.unlocked()
    let dir = fixture.path("tmp/meta")
    #expect(mkdir(dir, 0o755) == 0)
    let failures = Mutex<[String]>([])
    DispatchQueue.concurrentPerform(iterations: 4) { thread in
      for i in 0..<500 {
        let path = dir + "/t\(thread)-\(i)"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        if fd < 0 { failures.withLock { $0.append("create \(path): \(errno)") }; continue }
        close(fd)
        var st = stat()
        if stat(path, &st) != 0 { failures.withLock { $0.append("stat \(path): \(errno)") } }
        if i % 2 == 0, unlink(path) != 0 { failures.withLock { $0.append("unlink \(path): \(errno)") } }
      }
    }
    #expect(failures.withLock { $0 }.isEmpty)
    let expected = Set((0..<4).flatMap { t in stride(from: 1, to: 500, by: 2).map { "t\(t)-\($0)" } })
    #expect(Set(try directoryNames(dir)) == expected)
    #expect(Set(try directoryNames(fixture.backingPath("tmp/meta"))) == expected)
    try fixture.unmount()
  }
}
