import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// open/create, read/write, flush/release, fsync, fallocate, lseek, copy_file_range.
@Suite("File I/O", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct FileIOTests {
  @Test("O_CREAT|O_EXCL creates once, then fails with EEXIST")
  func createExclusive() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/excl")
    let fd = try openFile(path, O_WRONLY | O_CREAT | O_EXCL, 0o640)
    close(fd)
    #expect(errnoOf(open(path, O_WRONLY | O_CREAT | O_EXCL, 0o640)) == EEXIST)
    let st = try statPath(path)
    #expect(fileType(st) == S_IFREG)
    #expect(st.st_mode & 0o777 == 0o640)
    #expect(st.st_size == 0)
    #expect(try statPath(fixture.backingPath("Documents/excl")).st_mode & 0o777 == 0o640)
    try fixture.unmount()
  }

  @Test("open without O_CREAT: ENOENT, O_DIRECTORY on a file: ENOTDIR, a file as a directory: ENOTDIR")
  func openErrors() throws {
    let fixture = try MountFixture.unlocked()
    #expect(errnoOf(open(fixture.path("Documents/missing"), O_RDONLY)) == ENOENT)
    try writeFile(fixture.path("Documents/f"), bytes("x"))
    #expect(errnoOf(open(fixture.path("Documents/f"), O_RDONLY | O_DIRECTORY)) == ENOTDIR)
    #expect(errnoOf(open(fixture.path("Documents/f/child"), O_RDONLY)) == ENOTDIR)
    #expect(errnoOf(open(fixture.path("Documents/f/child"), O_WRONLY | O_CREAT, 0o644)) == ENOTDIR)
    #expect(errnoOf(open(fixture.path("Documents"), O_WRONLY)) == EISDIR)
    #expect(errnoOf(open(fixture.path("Documents/nodir/child"), O_WRONLY | O_CREAT, 0o644)) == ENOENT)
    try fixture.unmount()
  }

  @Test("two O_APPEND writers interleave without overwriting each other")
  func twoAppenders() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Library/Caches/log")
    try writeFile(path, bytes("head\n"))
    let a = try openFile(path, O_WRONLY | O_APPEND)
    let b = try openFile(path, O_WRONLY | O_APPEND)
    var expected = bytes("head\n")
    for i in 0..<50 {
      let lineA = bytes("a\(i)\n")
      let lineB = bytes("bb\(i)\n")
      try writeAll(a, lineA)
      try writeAll(b, lineB)
      expected += lineA + lineB
    }
    close(a)
    close(b)
    #expect(try readFile(path) == expected)
    #expect(try readFile(fixture.backingPath("Library/Caches/log")) == expected)
    try fixture.unmount()
  }

  @Test("pwrite/pread at offsets, a write past EOF leaves zeros, reads at EOF return 0")
  func offsets() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/offsets")
    let fd = try openFile(path, O_RDWR | O_CREAT, 0o644)
    try writeAll(fd, bytes("hello"), at: 0)
    try writeAll(fd, bytes("world"), at: 10)
    #expect(try fstatFD(fd).st_size == 15)
    #expect(try readAt(fd, count: 100, offset: 0) == bytes("hello") + [0, 0, 0, 0, 0] + bytes("world"))
    #expect(try readAt(fd, count: 3, offset: 11) == bytes("orl"))
    #expect(try readAt(fd, count: 10, offset: 15) == [])
    #expect(try readAt(fd, count: 10, offset: 1_000_000) == [])
    try writeAll(fd, bytes("LL"), at: 2)
    #expect(try readAt(fd, count: 5, offset: 0) == bytes("heLLo"))
    // Sequential read/write follow the file offset.
    #expect(lseek(fd, 5, SEEK_SET) == 5)
    try writeAll(fd, bytes("12345"))
    #expect(lseek(fd, 0, SEEK_CUR) == 10)
    #expect(lseek(fd, 0, SEEK_END) == 15)
    #expect(lseek(fd, 0, SEEK_SET) == 0)
    #expect(try readToEnd(fd) == bytes("heLLo12345world"))
    #expect(try readFile(fixture.backingPath("Documents/offsets")) == bytes("heLLo12345world"))
    close(fd)
    try fixture.unmount()
  }

  @Test("wrong-mode descriptors: write on O_RDONLY and read on O_WRONLY give EBADF, read on a directory EISDIR")
  func badDescriptors() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/f")
    try writeFile(path, bytes("data"))
    let ro = try openFile(path, O_RDONLY)
    #expect(errnoOf(write(ro, "x", 1)) == EBADF)
    close(ro)
    let wo = try openFile(path, O_WRONLY)
    var byte: UInt8 = 0
    #expect(errnoOf(read(wo, &byte, 1)) == EBADF)
    close(wo)
    let dir = try openFile(fixture.path("Documents"), O_RDONLY | O_DIRECTORY)
    #expect(errnoOf(read(dir, &byte, 1)) == EISDIR)
    close(dir)
    #expect(try readFile(path) == bytes("data"))
    try fixture.unmount()
  }

  @Test("close flushes: data is in the backing file once close returns, also with a dup'd descriptor")
  func flushOnClose() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/flushed")
    let fd = try openFile(path, O_WRONLY | O_CREAT, 0o644)
    let copy = try check(dup(fd), "dup")
    try writeAll(fd, bytes("first"))
    #expect(close(fd) == 0)
    try writeAll(copy, bytes("second"))
    #expect(close(copy) == 0)
    #expect(try readFile(fixture.backingPath("Documents/flushed")) == bytes("firstsecond"))
    try fixture.unmount()
  }

  @Test("fsync and fdatasync succeed and the data is in the backing file")
  func fsyncAndFdatasync() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Library/Application Support/db")
    let fd = try openFile(path, O_RDWR | O_CREAT, 0o600)
    try writeAll(fd, pattern(8192, seed: 1))
    #expect(fsync(fd) == 0)
    #expect(try readFile(fixture.backingPath("Library/Application Support/db")) == pattern(8192, seed: 1))
    try writeAll(fd, bytes("tail"))
    #expect(fdatasync(fd) == 0)
    #expect(
      try readFile(fixture.backingPath("Library/Application Support/db")) == pattern(8192, seed: 1) + bytes("tail"))
    close(fd)
    try fixture.unmount()
  }

  @Test("O_DIRECT with an aligned buffer writes and reads back")
  func directIO() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/direct")
    let size = 64 * 1024
    var raw: UnsafeMutableRawPointer?
    #expect(posix_memalign(&raw, 4096, size) == 0)
    let buffer = try #require(raw)
    defer { free(buffer) }
    let expected = pattern(size, seed: 7)
    expected.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: size) }
    let fd = try openFile(path, O_RDWR | O_CREAT | LinuxConstants.O_DIRECT, 0o644)
    #expect(pwrite(fd, buffer, size, 0) == size)
    memset(buffer, 0, size)
    #expect(pread(fd, buffer, size, 0) == size)
    #expect(memcmp(buffer, expected, size) == 0)
    // A second 4 KiB-aligned write at an aligned offset.
    #expect(pwrite(fd, buffer, 4096, off_t(size)) == 4096)
    #expect(try fstatFD(fd).st_size == off_t(size + 4096))
    close(fd)
    #expect(try readFile(fixture.backingPath("Documents/direct")) == expected + expected[..<4096])
    try fixture.unmount()
  }

  @Test(
    "fallocate: mode 0 grows the size, KEEP_SIZE allocates without growing; collapse range is EOPNOTSUPP (the kernel's)"
  )
  func fallocateGrow() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/alloc")
    let fd = try openFile(path, O_RDWR | O_CREAT, 0o644)
    #expect(errnoOf(Libc.fallocate(fd, 0, 0, 1 << 20)) == 0)
    var st = try fstatFD(fd)
    #expect(st.st_size == 1 << 20)
    #expect(st.st_blocks * 512 >= 1 << 20)
    #expect(try readAt(fd, count: 4096, offset: 4096) == [UInt8](repeating: 0, count: 4096))
    #expect(errnoOf(Libc.fallocate(fd, LinuxConstants.FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20)) == 0)
    st = try fstatFD(fd)
    #expect(st.st_size == 1 << 20)
    #expect(st.st_blocks * 512 >= 2 << 20)
    #expect(try statPath(fixture.backingPath("Documents/alloc")).st_size == 1 << 20)
    // Collapse and insert range: the kernel's FUSE client passes neither to a daemon.
    #expect(errnoOf(Libc.fallocate(fd, 0x08, 65_536, 65_536)) == EOPNOTSUPP)
    close(fd)
    try fixture.unmount()
  }

  @Test("fallocate PUNCH_HOLE: the range reads as zeros and st_blocks shrinks")
  func punchHole() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/punched")
    let size = 4 << 20
    let data = [UInt8](repeating: 0xAB, count: size)
    try writeFile(path, data)
    let fd = try openFile(path, O_RDWR)
    #expect(fsync(fd) == 0)
    let before = try fstatFD(fd).st_blocks
    let mode = LinuxConstants.FALLOC_FL_PUNCH_HOLE | LinuxConstants.FALLOC_FL_KEEP_SIZE
    #expect(errnoOf(Libc.fallocate(fd, mode, 1 << 20, 2 << 20)) == 0)
    let after = try fstatFD(fd)
    #expect(after.st_size == off_t(size))
    #expect(after.st_blocks <= before - (2 << 20) / 512, "blocks \(before) -> \(after.st_blocks)")
    #expect(try readAt(fd, count: 2 << 20, offset: 1 << 20) == [UInt8](repeating: 0, count: 2 << 20))
    #expect(try readAt(fd, count: 16, offset: (1 << 20) - 16) == [UInt8](repeating: 0xAB, count: 16))
    #expect(try readAt(fd, count: 16, offset: 3 << 20) == [UInt8](repeating: 0xAB, count: 16))
    // PUNCH_HOLE without KEEP_SIZE is invalid.
    #expect(errnoOf(Libc.fallocate(fd, LinuxConstants.FALLOC_FL_PUNCH_HOLE, 0, 4096)) == EOPNOTSUPP)
    close(fd)
    try fixture.unmount()
  }

  @Test("lseek SEEK_HOLE/SEEK_DATA find the hole and the data of a sparse file")
  func seekHoleData() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Library/Caches/sparse")
    let fd = try openFile(path, O_RDWR | O_CREAT, 0o644)
    let tenMiB = off_t(10 << 20)
    try writeAll(fd, [UInt8](repeating: 1, count: 4096), at: 0)
    try writeAll(fd, [UInt8](repeating: 2, count: 4096), at: tenMiB)
    #expect(fsync(fd) == 0)
    let hole = lseek(fd, 0, LinuxConstants.SEEK_HOLE)
    #expect(hole >= 4096 && hole < tenMiB, "SEEK_HOLE from 0 gave \(hole)")
    #expect(lseek(fd, 4096, LinuxConstants.SEEK_DATA) == tenMiB)
    #expect(lseek(fd, 0, LinuxConstants.SEEK_DATA) == 0)
    #expect(lseek(fd, tenMiB, LinuxConstants.SEEK_HOLE) == tenMiB + 4096)
    #expect(errnoOf(lseek(fd, tenMiB + 4096, LinuxConstants.SEEK_DATA)) == ENXIO)
    #expect(errnoOf(lseek(fd, tenMiB + 8192, LinuxConstants.SEEK_HOLE)) == ENXIO)
    #expect(try fstatFD(fd).st_blocks * 512 < 1 << 20, "sparse file is not sparse")
    close(fd)
    try fixture.unmount()
  }

  @Test("copy_file_range copies between files of the mount, with offsets")
  func copyFileRange() throws {
    let fixture = try MountFixture.unlocked()
    let source = pattern(300_000, seed: 3)
    try writeFile(fixture.path("Documents/src"), source)
    let input = try openFile(fixture.path("Documents/src"), O_RDONLY)
    let output = try openFile(fixture.path("Library/Caches/dst"), O_WRONLY | O_CREAT, 0o644)
    var inOffset = off_t(1000)
    var outOffset = off_t(10)
    var remaining = 200_000
    while remaining > 0 {
      let n = try check(
        Libc.copyFileRange(input, &inOffset, output, &outOffset, remaining, 0), "copy_file_range")
      #expect(n > 0)
      if n == 0 { break }
      remaining -= n
    }
    #expect(inOffset == 201_000)
    #expect(outOffset == 200_010)
    close(input)
    close(output)
    let copied = try readFile(fixture.path("Library/Caches/dst"))
    #expect(copied.count == 200_010)
    #expect(Array(copied[..<10]) == [UInt8](repeating: 0, count: 10))
    #expect(Array(copied[10...]) == Array(source[1000..<201_000]))
    #expect(try readFile(fixture.backingPath("Library/Caches/dst")) == copied)
    try fixture.unmount()
  }

  @Test("copy_file_range through Python's os.copy_file_range copies a whole file")
  func copyFileRangePython() throws {
    let fixture = try MountFixture.unlocked()
    let source = pattern(100_000, seed: 4)
    try writeFile(fixture.path("Documents/a"), source)
    let script = """
      import os, sys
      src = os.open(sys.argv[1], os.O_RDONLY); dst = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
      n = 0
      while True:
          k = os.copy_file_range(src, dst, 1 << 20)
          if k == 0: break
          n += k
      print(n)
      """
    let result = try Command.run(
      "python3", ["-c", script, fixture.path("Documents/a"), fixture.path("Documents/b")])
    #expect(result.status == 0, "\(result.error)")
    #expect(result.output.trimmingCharacters(in: .whitespacesAndNewlines) == "100000")
    #expect(try readFile(fixture.path("Documents/b")) == source)
    try fixture.unmount()
  }

  @Test("a shared writable mmap: stores reach the backing file after msync and munmap")
  func sharedMmap() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/mapped")
    let fd = try openFile(path, O_RDWR | O_CREAT, 0o644)
    #expect(ftruncate(fd, 8192) == 0)
    let mapping = mmap(nil, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
    try #require(mapping != MAP_FAILED)
    let base = mapping!.assumingMemoryBound(to: UInt8.self)
    for i in 0..<8192 { base[i] = UInt8(truncatingIfNeeded: i * 7) }
    #expect(msync(mapping, 8192, MS_SYNC) == 0)
    #expect(munmap(mapping, 8192) == 0)
    close(fd)
    let expected = (0..<8192).map { UInt8(truncatingIfNeeded: $0 * 7) }
    #expect(try readFile(path) == expected)
    #expect(try readFile(fixture.backingPath("Documents/mapped")) == expected)
    try fixture.unmount()
  }

}
