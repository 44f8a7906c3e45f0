// Many processes at once: random data and metadata calls (every fallocate mode, O_DIRECT,
// renames and links, xattrs and classes) in Documents, Library/Caches and tmp of a small
// sandbox, while the test purges and locks from outside. Nothing is compared step by step
// (the processes race); what must hold at the end: `used` equals `du`, the mount shows
// exactly the backing tree, and the daemon logged no failed kernel notification.
//
// Environment: APPBOX_DIFF_SEED (workers' seeds derive from it), APPBOX_STRESS_OPS (per
// worker, default 5000).
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Concurrent random operations with purges", .needsFUSE, .timeLimit(.minutes(10)))
struct ConcurrentRandomTests {
  static let workers = 4
  static let capacity: Int64 = 2 << 20

  /// One worker: random operations on the shared trees, errors ignored (they race).
  static let worker = #"""
    import ctypes, os, random, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    mount, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    roots = ["Documents/mp", "Library/Caches/mp", "Library/Caches/mp", "tmp/mp", "tmp/mp"]
    names = ["a", "b", "c", "d", "e"]
    classes = ["complete", "B", "C", "none", "7", "bogus"]
    def path():
        depth = rng.choice([1, 1, 2, 2, 3])
        return os.path.join(mount, rng.choice(roots), *[rng.choice(names) for _ in range(depth)])
    def data():
        return os.urandom(rng.choice([1, 100, 4096, 5000, 65536, 200000]))
    for _ in range(count):
        p, q, k = path(), path(), rng.randrange(100)
        try:
            if k < 22:
                flags = os.O_WRONLY | os.O_CREAT
                if rng.random() < 0.2: flags |= os.O_DIRECT
                if rng.random() < 0.15: flags |= os.O_TRUNC
                fd = os.open(p, flags, 0o644)
                try: os.pwrite(fd, data(), rng.choice([0, 4096, 12345, 300000]))
                finally: os.close(fd)
            elif k < 32:
                fd = os.open(p, os.O_RDWR | (os.O_DIRECT if rng.random() < 0.2 else 0))
                try:
                    for _ in range(rng.randrange(1, 4)):
                        mode = rng.choice([0, 1, 3, 0x10])
                        libc.fallocate(fd, mode, rng.randrange(0, 300000), rng.randrange(1, 120000))
                finally: os.close(fd)
            elif k < 42: os.rename(p, q)
            elif k < 46: os.link(p, q)
            elif k < 54: os.unlink(p)
            elif k < 60: os.mkdir(p)
            elif k < 64: os.rmdir(p)
            elif k < 72:
                name = rng.choice(["user.a", "user.big", "com.apple.MobileBackup",
                                   "com.apple.metadata:com_apple_backup_excludeItem"])
                os.setxattr(p, name, os.urandom(rng.choice([1, 61, 700])))
            elif k < 75: os.removexattr(p, rng.choice(["user.a", "user.big", "com.apple.MobileBackup"]))
            elif k < 79: os.setxattr(p, "user.appbox.protection", rng.choice(classes).encode())
            elif k < 84: os.truncate(p, rng.randrange(0, 300000))
            elif k < 88: os.symlink(rng.choice(["a", "../b", "."]), p)
            elif k < 94:
                with open(p, "rb") as f: f.read()
            else: os.listdir(p)
        except OSError:
            pass
    """#

  @Test("many processes, purges and lock changes: used == du, the mount shows the backing tree, no failed notification")
  func manyProcesses() throws {
    let environment = ProcessInfo.processInfo.environment
    let seed = environment["APPBOX_DIFF_SEED"].flatMap(DifferentialTests.parseSeed) ?? 0xA9B0_C0DE_2024_0018
    let count = environment["APPBOX_STRESS_OPS"].flatMap { Int($0) } ?? 5000
    print("ConcurrentRandomTests: seed \(seed), \(Self.workers) workers × \(count) operations")
    let fixture = try MountFixture(arguments: [
      "--unlocked", "--grace", "0", "--cx-timeout", "1h", "--capacity", String(Self.capacity),
    ])
    for root in ["Documents/mp", "Library/Caches/mp", "tmp/mp"] { try #require(mkdir(fixture.path(root), 0o755) == 0) }
    let script = fixture.root + "/worker.py"
    try Data(Self.worker.utf8).write(to: URL(fileURLWithPath: script))

    let started = Date()
    var processes: [Process] = []
    for index in 0..<Self.workers {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
      process.arguments = [script, fixture.mountpoint, String(seed &+ UInt64(index)), String(count)]
      try process.run()
      processes.append(process)
    }
    // Meanwhile: explicit purges and lock changes from outside.
    var random = SeededGenerator(seed: seed)
    var controls: [String: Int] = [:]
    while processes.contains(where: \.isRunning) {
      let arguments = random.pick([
        ["purge", fixture.mountpoint, "--bytes", "\(random.inRange(4...1024))K"],
        ["purge", fixture.mountpoint, "--domain", "tmp", "--all"],
        ["purge", fixture.mountpoint, "--domain", "caches", "--all"],
        ["lock", fixture.mountpoint], ["unlock", fixture.mountpoint],
      ])
      let result = try Command.run(Command.appbox, arguments)
      #expect(result.status == 0, "appbox \(arguments): \(result.error)")
      controls[arguments[0], default: 0] += 1
      let pause = Date().addingTimeInterval(Double(random.inRange(20...150)) / 1000)
      _ = fixture.waitUntil(seconds: 1) { Date() >= pause || !processes.contains(where: \.isRunning) }
    }
    for process in processes {
      process.waitUntilExit()
      #expect(process.terminationStatus == 0, "a worker failed (exit \(process.terminationStatus))")
    }
    print(
      "ConcurrentRandomTests: \(String(format: "%.1f", Date().timeIntervalSince(started))) s, controls \(controls)")

    try fixture.control("unlock")
    #expect(Quota.waitForReleases(fixture))
    // A pressure purge tells the kernel from the daemon's maintenance queue, which may lag
    // on a loaded machine: both checks wait (with a deadline) for the daemon to settle.
    var used: Int64 = -1
    var du: Int64 = -1
    let agreed = fixture.waitUntil(seconds: 10) {
      used = (try? Quota.status(fixture.mountpoint)).map { Quota.number($0, "used") } ?? -1
      du = (try? Quota.du(fixture.backing)) ?? -2
      return used == du
    }
    let purges = Quota.number(try Quota.status(fixture.mountpoint), "purges")
    print("ConcurrentRandomTests: used \(used), du \(du), purges \(purges)")
    #expect(agreed, "seed \(seed): status used \(used) != du \(du) (diff \(used - du))")
    #expect(purges > 0, "the run purged nothing: it tests less than it should")
    // The mount shows the backing tree: Apple's names are kept under user.appbox.x., the
    // inherited class is not listed.
    var comparison = TreeComparison()
    comparison.xattrFilter = { $0 != Array("user.appbox.inherited-protection".utf8) }
    comparison.xattrName = { name in
      name.starts(with: Array(PolicyModel.foreignPrefix.utf8)) ? Array(name.dropFirst(14)) : name
    }
    var problems: [String] = []
    let same = fixture.waitUntil(seconds: 10) {
      do {
        problems = try ["Documents", "Library/Caches", "tmp"].flatMap {
          try comparison.differences(fixture.backingPath($0), fixture.path($0))
        }
      } catch {
        problems = ["\(error)"]
      }
      return problems.isEmpty
    }
    #expect(same, "seed \(seed): the mount differs from its backing:\n\(problems.joined(separator: "\n"))")
    let log = ControlFiles.path(for: fixture.mountpoint, "log")
    try fixture.unmount()
    let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")  // throws if it is not there
    let failed = lines.filter { $0.contains("writing device") }
    #expect(
      failed.isEmpty, "seed \(seed): the daemon's log has failed notifications:\n\(failed.joined(separator: "\n"))")
  }
}
