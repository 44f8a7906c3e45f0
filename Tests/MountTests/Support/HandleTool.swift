import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `name_to_handle_at` and `open_by_handle_at` from a Python child (ctypes), so that the
/// open can run as another user (with CAP_DAC_READ_SEARCH, which it needs) and the
/// calling test keeps no descriptor that would hold the kernel's inode.
enum HandleTool {
  static let script = #"""
    import ctypes, errno, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    class Handle(ctypes.Structure):
        _fields_ = [("size", ctypes.c_uint), ("type", ctypes.c_int), ("bytes", ctypes.c_ubyte * 128)]
    def fail(call):
        print(errno.errorcode[ctypes.get_errno()]); sys.exit(0)
    command, path = sys.argv[1], sys.argv[2]
    if command == "encode":
        handle, mount = Handle(size=128), ctypes.c_int()
        if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(handle), ctypes.byref(mount), 0): fail("encode")
        print("%d:%s" % (handle.type, bytes(handle.bytes[:handle.size]).hex()))
    else:
        kind, raw = sys.argv[3].split(":")
        raw = bytes.fromhex(raw)
        handle = Handle(size=len(raw), type=int(kind))
        ctypes.memmove(handle.bytes, raw, len(raw))
        mount = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        flags = {"read": os.O_RDONLY, "list": os.O_RDONLY | os.O_DIRECTORY, "write": os.O_WRONLY | os.O_APPEND}
        fd = libc.open_by_handle_at(mount, ctypes.byref(handle), flags[command])
        if fd < 0: fail("open")
        if command == "list": print(",".join(sorted(os.listdir(fd))))
        elif command == "write": print(os.write(fd, b"+"))
        else: print(os.read(fd, 4096).decode())
    """#

  /// The handle of `path` as `type:hex`, or the errno's name.
  static func encode(_ path: String) throws -> String {
    try run(["encode", path])
  }

  /// Opens `handle` on the filesystem of `mount`: the file's text ("read"), the
  /// directory's names, comma-separated ("list"), the bytes appended ("write", 1), or
  /// the errno's name.
  /// - Parameter uid: run as this user, keeping CAP_DAC_READ_SEARCH (nil: root).
  static func open(_ handle: String, on mount: String, _ command: String = "read", as uid: uid_t? = nil) throws
    -> String
  {
    let arguments = [command, mount, handle]
    guard let uid else { return try run(arguments) }
    let result = try Command.run(
      "/usr/bin/setpriv",
      [
        "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--inh-caps=+dac_read_search",
        "--ambient-caps=+dac_read_search", "/usr/bin/python3", "-c", script,
      ] + arguments)
    #expect(result.status == 0, "handle tool as \(uid): \(result.error)")
    return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
  }

  private static func run(_ arguments: [String]) throws -> String {
    let result = try Command.run("/usr/bin/python3", ["-c", script] + arguments)
    #expect(result.status == 0, "handle tool: \(result.error)")
    return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
  }

  /// Whether this process has CAP_DAC_READ_SEARCH (bit 2 of `CapEff`), which
  /// `open_by_handle_at` needs, the daemon's and the tests' own.
  static let hasReadSearchCapability: Bool = {
    guard let status = try? String(decoding: readFile("/proc/self/status"), as: UTF8.self),
      let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
      let mask = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
    else { return false }
    return mask & (1 << 2) != 0
  }()

  static let missing =
    "needs CAP_DAC_READ_SEARCH for open_by_handle_at (in a container: docker run --cap-add DAC_READ_SEARCH)"

  /// Fails the test, naming what is missing.
  static func requireCapability() throws {
    try #require(hasReadSearchCapability, "\(missing)")
  }

  /// Makes the kernel forget the mount's unused dentries and inodes (FUSE then sends
  /// forgets), and waits until the daemon holds at most `nodes` nodes: `appbox
  /// drop-caches`, and `/proc/sys/vm/drop_caches` where it can be written (not in a
  /// container), which also drops what no name reaches: files opened by handle.
  /// Whether this process may write `/proc/sys/vm/drop_caches` (not in a container).
  static let canDropCaches = access("/proc/sys/vm/drop_caches", W_OK) == 0

  static func evict(_ fixture: MountFixture, downTo nodes: Int64 = 0) -> Bool {
    fixture.waitUntil(seconds: 10) {
      let dropped = try? Command.run(Command.appbox, ["drop-caches", fixture.mountpoint])
      #expect(dropped?.status == 0, "appbox drop-caches: \(dropped?.error ?? "did not run")")
      let drop = Glibc.open("/proc/sys/vm/drop_caches", O_WRONLY)
      if drop >= 0 {
        _ = write(drop, "2", 1)
        close(drop)
      }
      return (try? Quota.number(Quota.status(fixture.mountpoint), "nodes")).map { $0 <= nodes } ?? false
    }
  }
}

extension Trait where Self == ConditionTrait {
  /// What the tests that open files by handle need: CAP_DAC_READ_SEARCH (their backing
  /// directories are on a tmpfs of their own, which gives handles wherever they run). In
  /// CI the tests fail, naming it, instead of skipping.
  static var needsHandleCapability: Self {
    .enabled(
      if: HandleTool.hasReadSearchCapability || ProcessInfo.processInfo.environment["CI"] != nil,
      Comment(rawValue: HandleTool.missing))
  }
}
