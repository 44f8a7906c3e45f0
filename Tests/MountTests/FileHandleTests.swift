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

  /// Builds the same small tree under `base` (the mount's Documents, or a plain tmpfs
  /// directory) and returns the handles of a file, a directory two levels down, a 0600
  /// file and a file then deleted.
  static func tree(_ base: String) throws -> (file: String, directory: String, secret: String, deleted: String) {
    try Command.shell(
      "cd '\(base)' && mkdir -p d/e && echo hello > f && echo inner > d/e/g && mkdir d/e/h && echo s > s"
        + " && chmod 600 s && chmod 755 . d d/e && echo gone > x")
    let handles = try (
      HandleTool.encode(base + "/f"), HandleTool.encode(base + "/d/e"), HandleTool.encode(base + "/s"),
      HandleTool.encode(base + "/x")
    )
    #expect(unlink(base + "/x") == 0)
    return handles
  }

  @Test(
    "handles of files and directories open after the kernel forgot the inodes, for another user as the mode allows, as on a local filesystem",
    .needsHandleCapability)
  func handlesOutliveTheKernelsInodes() throws {
    try HandleTool.requireCapability()
    let fixture = try MountFixture(arguments: ["--unlocked", "-o", "allow_other"], backingOnTmpfs: true)
    #expect(chmod(fixture.root, 0o755) == 0)
    let plain = fixture.root + "/plain"
    #expect(mkdir(plain, 0o755) == 0)
    try fixture.directories.mountTmpfs(plain)  // a local filesystem with handles, as the backing is
    let onMount = try Self.tree(fixture.path("Documents"))
    let onExt4 = try Self.tree(plain)
    #expect(HandleTool.evict(fixture), "the kernel kept inodes of the mount")
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "retainedHandles") >= 5, "\(status)")
    for (handles, mount) in [(onMount, fixture.mountpoint), (onExt4, plain)] {
      #expect(try HandleTool.open(handles.file, on: mount) == "hello", "\(mount)")
      #expect(try HandleTool.open(handles.directory, on: mount, "list") == "g,h", "\(mount)")
      #expect(try HandleTool.open(handles.deleted, on: mount) == "ESTALE", "\(mount)")
      #expect(try HandleTool.open(handles.secret, on: mount) == "s", "\(mount)")
      // Another user: the handle finds the file, the mode bits decide the open (reading
      // is what CAP_DAC_READ_SEARCH, which open_by_handle_at needs, lets it bypass).
      #expect(try HandleTool.open(handles.file, on: mount, as: OwnershipTests.nobody) == "hello", "\(mount)")
      #expect(try HandleTool.open(handles.secret, on: mount, as: OwnershipTests.nobody) == "s", "\(mount)")
      #expect(try HandleTool.open(handles.file, on: mount, "write", as: OwnershipTests.nobody) == "EACCES")
      #expect(try HandleTool.open(handles.file, on: mount, "write") == "1", "\(mount)")
      #expect(try HandleTool.open(handles.directory, on: mount, "list", as: OwnershipTests.nobody) == "g,h")
    }
    // Again once forgotten a second time: the node came back under the same id. (The two
    // files opened by handle above have no name in the kernel's cache, so only
    // drop_caches drops them, which a container cannot write.)
    #expect(HandleTool.evict(fixture, downTo: HandleTool.canDropCaches ? 0 : 2))
    #expect(try HandleTool.open(onMount.directory, on: fixture.mountpoint, "list") == "g,h")
    let words = onMount.file  // the node id: two 32-bit words, high first, in memory order
      .split(separator: ":")[1].prefix(16)
    let high = UInt32(words.prefix(8), radix: 16)!.byteSwapped
    let low = UInt32(words.suffix(8), radix: 16)!.byteSwapped
    #expect(UInt64(high) << 32 | UInt64(low) == (try Self.nodeID(of: fixture.path("Documents/f"))))
    try fixture.unmount()
  }

  @Test(
    "a purged file's handle is stale, and so is every handle from before a remount", .needsHandleCapability)
  func purgedAndRemountedHandlesAreStale() throws {
    try HandleTool.requireCapability()
    let fixture = try MountFixture(arguments: ["--unlocked"], backingOnTmpfs: true)
    #expect(FileManager.default.createFile(atPath: fixture.path("tmp/scratch"), contents: Data("t".utf8)))
    #expect(FileManager.default.createFile(atPath: fixture.path("Documents/kept"), contents: Data("k".utf8)))
    let scratch = try HandleTool.encode(fixture.path("tmp/scratch"))
    let kept = try HandleTool.encode(fixture.path("Documents/kept"))
    let directory = try HandleTool.encode(fixture.path("Documents"))
    #expect(HandleTool.evict(fixture))
    let purge = try Command.run(Command.appbox, ["purge", fixture.mountpoint, "--domain", "tmp", "--all"])
    #expect(purge.status == 0, "\(purge.error)")
    #expect(try HandleTool.open(scratch, on: fixture.mountpoint) == "ESTALE")
    #expect(try HandleTool.open(kept, on: fixture.mountpoint) == "k")
    // The same file under a new daemon: node ids start again, the generation differs.
    try fixture.remount()
    #expect(FileManager.default.createFile(atPath: fixture.path("Documents/new"), contents: Data("n".utf8)))
    #expect(try HandleTool.open(kept, on: fixture.mountpoint) == "ESTALE")
    #expect(try HandleTool.open(directory, on: fixture.mountpoint, "list") == "ESTALE")
    #expect(HandleTool.evict(fixture))
    #expect(try HandleTool.open(kept, on: fixture.mountpoint) == "ESTALE")
    try fixture.unmount()
  }

  @Test(
    "--handles bounds the forgotten nodes whose handles stay valid; 0 keeps none", .needsHandleCapability,
    arguments: [0, 3]
  )
  func retainedHandlesAreBounded(limit: Int) throws {
    try HandleTool.requireCapability()
    let fixture = try MountFixture(arguments: ["--unlocked", "--handles", String(limit)], backingOnTmpfs: true)
    var handles: [String] = []
    for index in 0..<8 {
      let path = fixture.path("Documents/f\(index)")
      #expect(FileManager.default.createFile(atPath: path, contents: Data("\(index)".utf8)))
      handles.append(try HandleTool.encode(path))
    }
    #expect(HandleTool.evict(fixture))
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "retainedHandles") == Int64(limit))
    let opened = try handles.filter { try HandleTool.open($0, on: fixture.mountpoint) != "ESTALE" }
    #expect(opened.count <= limit, "\(opened.count) of 8 handles opened with --handles \(limit)")
    try fixture.unmount()
  }
}
