import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `O_DIRECT` handles as on ext4: they may be mapped shared, and what a direct write
/// changed is what the page cache serves afterwards, through a mapping or a buffered read.
@Suite("Direct I/O", .needsFUSE, .timeLimit(.minutes(10)))
struct DirectIOTests {
  @Test(
    "an O_DIRECT file maps shared; mapped, buffered and direct views agree after each kind of write",
    arguments: [["--unlocked"], ["--unlocked", "--no-passthrough"]])
  func directFilesMapShared(options: [String]) throws {
    let fixture = try MountFixture(arguments: options)
    let path = fixture.path("Documents/direct")
    try writeFile(path, [UInt8](repeating: UInt8(ascii: "A"), count: 1 << 20))
    let script = """
      import mmap, os, sys
      path = sys.argv[1]
      reader = os.open(path, os.O_RDONLY)
      os.pread(reader, 4096, 0)  # the page cache holds the old bytes (unless passthrough)
      fd = os.open(path, os.O_RDWR | os.O_DIRECT)
      view = mmap.mmap(fd, 8192, mmap.MAP_SHARED)
      view[0:4] = b"MMAP"
      view.flush()
      assert os.pread(reader, 4, 0) == b"MMAP", "buffered read after a mapped write"
      block = mmap.mmap(-1, 4096)
      block[:] = b"D" * 4096
      os.pwritev(fd, [block], 4096)
      assert view[4096:4100] == b"DDDD", "mapped view after a direct write"
      assert os.pread(reader, 4, 4096) == b"DDDD", "buffered read after a direct write"
      print("ok")
      """
    let mapped = try Command.run("/usr/bin/python3", ["-c", script, path])
    #expect(mapped.status == 0 && mapped.output.contains("ok"), "\(options): \(mapped.error)")

    // Asynchronous direct writes (libaio, 16 in flight), then buffered reads of the range.
    let reader = try openFile(path, O_RDONLY)
    _ = try readAt(reader, count: 1 << 20, offset: 0)
    let fio = try Command.run(
      "/usr/bin/fio",
      [
        "--name=aio", "--filename=\(path)", "--direct=1", "--ioengine=libaio", "--iodepth=16", "--rw=randwrite",
        "--bs=4k", "--size=1M", "--buffer_pattern=0x42", "--minimal",
      ])
    #expect(fio.status == 0, "fio: \(fio.error)")
    let after = try readAt(reader, count: 1 << 20, offset: 0)
    #expect(after == [UInt8](repeating: 0x42, count: 1 << 20), "\(options): buffered read after async direct writes")
    close(reader)
    try fixture.unmount()
  }
}
