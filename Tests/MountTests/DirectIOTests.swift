import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `O_DIRECT` handles as on ext4: they may be mapped shared, and what a direct write
/// changed is what the page cache serves afterwards, through a mapping or a buffered read,
/// also when buffered readers race asynchronous direct writes of the same bytes.
@Suite("Direct I/O", .needsFUSE, .timeLimit(.minutes(10)))
struct DirectIOTests {
  /// xfstests' generic/451 in Python (raw `io_submit`, no libaio): readers open, read and
  /// close the file in a loop while the writer rewrites all of it with one asynchronous
  /// `O_DIRECT` write, alternating two patterns; after each completion a fresh buffered
  /// read must show the pattern just written. Runs until `seconds` pass or `rounds` are
  /// done, then prints `rounds N stale M`.
  static let raceScript = #"""
    import ctypes, mmap, os, platform, sys, time
    path, seconds, rounds_max, readers = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    size = 640 * 1024
    setup, submit, getevents = {"x86_64": (206, 209, 208), "aarch64": (0, 2, 4)}[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    class IOCB(ctypes.Structure):
        _fields_ = [("data", ctypes.c_uint64), ("key", ctypes.c_uint32), ("rw_flags", ctypes.c_int32),
                    ("opcode", ctypes.c_uint16), ("prio", ctypes.c_int16), ("fd", ctypes.c_uint32),
                    ("buf", ctypes.c_uint64), ("nbytes", ctypes.c_uint64), ("offset", ctypes.c_int64),
                    ("reserved", ctypes.c_uint64), ("flags", ctypes.c_uint32), ("resfd", ctypes.c_uint32)]
    class Event(ctypes.Structure):
        _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64), ("res", ctypes.c_int64), ("res2", ctypes.c_int64)]
    patterns = [mmap.mmap(-1, size), mmap.mmap(-1, size)]
    patterns[0][:] = b"\x55" * size
    patterns[1][:] = b"\xaa" * size
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
    os.pwrite(fd, patterns[0], 0)
    os.close(fd)
    stop = mmap.mmap(-1, 4096)
    children = []
    for _ in range(readers):
        pid = os.fork()
        if pid == 0:
            while stop[0] == 0:
                r = os.open(path, os.O_RDONLY)
                os.pread(r, size, 0)
                os.close(r)
            os._exit(0)
        children.append(pid)
    context = ctypes.c_ulong(0)
    assert libc.syscall(setup, 1, ctypes.byref(context)) == 0, ctypes.get_errno()
    rounds = stale = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and rounds < rounds_max:
        rounds += 1
        pattern = patterns[rounds % 2]
        d = os.open(path, os.O_RDWR | os.O_DIRECT)
        cb = IOCB(opcode=1, fd=d, buf=ctypes.addressof(ctypes.c_char.from_buffer(pattern)), nbytes=size)
        assert libc.syscall(submit, context, 1, ctypes.byref(ctypes.pointer(cb))) == 1, ctypes.get_errno()
        event = Event()
        assert libc.syscall(getevents, context, 1, 1, ctypes.byref(event), None) == 1, ctypes.get_errno()
        assert event.res == size, event.res
        os.close(d)
        b = os.open(path, os.O_RDONLY)
        if os.pread(b, size, 0) != pattern[:]:
            stale += 1
        os.close(b)
    stop[0] = 1
    for pid in children:
        os.waitpid(pid, 0)
    print("rounds", rounds, "stale", stale)
    """#

  @Test(
    "buffered reads racing asynchronous direct writes show each completed write",
    arguments: [["--unlocked"], ["--unlocked", "--no-passthrough"]])
  func buffersRacingAsyncDirectWrites(options: [String]) throws {
    let fixture = try MountFixture(arguments: options)
    let race = try Command.run(
      "/usr/bin/python3", ["-c", Self.raceScript, fixture.path("Documents/cycle"), "8", "3000", "2"])
    #expect(race.status == 0, "\(race.error)")
    let counts = race.output.split(separator: " ").compactMap {
      Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    try #require(counts.count == 2, "\(race.output)")
    #expect(counts[0] >= 50, "rounds done: \(counts[0])")
    #expect(counts[1] == 0, "\(options): \(counts[1]) of \(counts[0]) buffered reads showed bytes older than the write")
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "stalePages.lapsed") == 0)
    if options.contains("--no-passthrough") {
      // The readers' pages are the kernel's: the writes' replies waited for them to go.
      #expect(Quota.number(status, "stalePages.dropped") > 0)
    }
    try fixture.unmount()
  }

  @Test("a deep asynchronous direct-write loop beside buffered readers of the same bytes does not hang the mount")
  func deepDirectWritesBesideReaders() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--no-passthrough"])
    let path = fixture.path("Documents/deep")
    try writeFile(path, [UInt8](repeating: 0x41, count: 4 << 20))
    // 128 writes of 4 KiB in flight (more than the kernel's default room for background
    // requests) while two programs read the file through the page cache. Dropping stale
    // pages on the thread that reads requests would hang here for good; over /dev/fuse,
    // too little room for background requests would stall a second at a time (lapses).
    // Over io_uring a write is answered on its worker, whose entry waits meanwhile: when
    // every entry of a CPU's queue waits and no invalidation goes on, those writes are
    // answered without it (docs/reference.md), so lapses are expected there.
    let fio = try Command.run(
      "/usr/bin/timeout",
      [
        "120", "/usr/bin/fio", "--minimal", "--filename=\(path)", "--size=4M", "--time_based", "--runtime=5",
        "--name=writer", "--rw=randwrite", "--direct=1", "--ioengine=libaio", "--iodepth=128", "--bs=4k",
        "--name=sequential", "--rw=read", "--direct=0", "--ioengine=psync", "--bs=128k",
        "--name=random", "--rw=randread", "--direct=0", "--ioengine=psync", "--bs=64k",
      ])
    #expect(fio.status == 0, "fio exited \(fio.status) (124: it hung): \(fio.error)")
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "stalePages.dropped") > 0)
    if (status["transport"] as? [String: Any])?["inUse"] as? String == "dev-fuse" {
      #expect(Quota.number(status, "stalePages.lapsed") == 0, "writes replied to before their stale pages went")
    }
    // And the file reads back what a last direct write put there.
    let script = """
      import mmap, os, sys
      d = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
      block = mmap.mmap(-1, 1 << 20)
      block[:] = b"Z" * (1 << 20)
      os.pwrite(d, block, 0)
      os.close(d)
      b = os.open(sys.argv[1], os.O_RDONLY)
      assert os.pread(b, 1 << 20, 0) == b"Z" * (1 << 20)
      print("ok")
      """
    let check = try Command.run("/usr/bin/python3", ["-c", script, path])
    #expect(check.output.contains("ok"), "\(check.error)")
    try fixture.unmount()
  }

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
