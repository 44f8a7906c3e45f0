import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// Whether passthrough can be offered here: the filesystem arms a file for revocation
/// (fanotify's permission events, CAP_SYS_ADMIN) before it registers it. Under CI the
/// tests that need it run regardless, and fail without it.
enum PassthroughSupport {
  static let available: Bool = (try? PermissionEvents()) != nil  // nil: not here
  static var enabled: Bool { available || getenv("CI") != nil }
}

/// What an open replies with: how the kernel may cache, flush and do I/O on the handle,
/// and which opens the kernel serves itself from the backing file (passthrough), decided
/// by the filesystem. (Whether the kernel then honours it is for the mount tests.)
@Suite("Open replies and passthrough decisions through the protocol")
struct OpenReplyTests {
  /// `open` of `path`, the whole reply.
  static func open(_ box: Sandbox, _ path: String, flags: Int32) throws(Errno) -> (NodeID, OpenedFile) {
    let node = try box.lookup(path)
    return (node, try box.fs.open(Sandbox.root, node: node, flags: flags))
  }

  @Test(
    "a cached handle keeps the page cache and needs no flush; O_DIRECT and write-only handles bypass the cache; listings are cacheable"
  )
  func replyFlags() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", pattern(8192))
    let (node, cached) = try Self.open(box, "Documents/f", flags: O_RDWR)
    #expect(cached.keepCache && !cached.directIO && cached.noFlush && cached.backing == nil)
    let (_, direct) = try Self.open(box, "Documents/f", flags: O_RDWR | Linux.openDirect)
    #expect(direct.directIO && !direct.keepCache)
    let (_, writeOnly) = try Self.open(box, "Documents/f", flags: O_WRONLY | O_APPEND)
    #expect(writeOnly.directIO && !writeOnly.keepCache && writeOnly.backing == nil)
    #expect(try box.write((node, writeOnly.handle), pattern(10, seed: 3), at: 0) == 10)
    #expect(try box.read((node, cached.handle), count: 10, at: 8192) == pattern(10, seed: 3), "appended")
    box.fs.release(Sandbox.root, node: node, handle: writeOnly.handle)
    // The backing descriptor is opened without O_DIRECT: unaligned I/O works on the handle.
    #expect(try box.write((node, direct.handle), pattern(100, seed: 2), at: 3) == 100)
    let expected = Array(pattern(8192)[1..<3]) + Array(pattern(100, seed: 2).prefix(5))
    #expect(try box.read((node, direct.handle), count: 7, at: 1) == expected)
    box.fs.release(Sandbox.root, node: node, handle: cached.handle)
    box.fs.release(Sandbox.root, node: node, handle: direct.handle)
    let documents = try box.lookup("Documents")
    let directory = try box.fs.opendir(Sandbox.root, node: documents, flags: O_RDONLY)
    #expect(directory.keepCache && directory.cacheDirectory)
    box.fs.releasedir(Sandbox.root, node: documents, handle: directory.handle)
    try box.expectExactBooks()
  }

  @Test("flush and fsync of a handle succeed and change nothing in the books")
  func flushAndFsync() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    #expect(try box.write(file, pattern(10_000)) == 10_000)
    try box.fs.flush(Sandbox.root, node: file.node, handle: file.handle)
    try box.fs.fsync(Sandbox.root, node: file.node, handle: file.handle, dataOnly: true)
    box.release(file)
    let documents = try box.lookup("Documents")
    let directory = try box.fs.opendir(Sandbox.root, node: documents, flags: O_RDONLY)
    try box.fs.fsyncdir(Sandbox.root, node: documents, handle: directory.handle, dataOnly: false)
    box.fs.releasedir(Sandbox.root, node: documents, handle: directory.handle)
    try box.expectExactBooks()
  }

  @Test(
    "read-only opens of files whose class can never close again are passthrough; writers join through the daemon",
    .enabled(if: PassthroughSupport.enabled, "needs fanotify's permission events (CAP_SYS_ADMIN)"))
  func passthroughOpens() throws {
    let files = RecordingPassthrough()
    let box = try Sandbox(driver: InMemoryDriver(passthrough: files))
    for (directory, protectionClass) in [
      ("a", "complete"), ("b", "completeUnlessOpen"), ("cx", "completeWhenUserInactive"), ("d", "none"),
    ] {
      try box.mkdir("Documents/" + directory)
      try box.protect("Documents/" + directory, protectionClass)
      try box.writeFile("Documents/\(directory)/f", bytes(directory))
    }
    try box.writeFile("Documents/c", bytes("c"))
    var passthrough: [String: Bool] = [:]
    var held: [(NodeID, OpenedFile)] = []
    for path in ["Documents/a/f", "Documents/b/f", "Documents/cx/f", "Documents/d/f", "Documents/c"] {
      let opened = try Self.open(box, path, flags: O_RDONLY)
      passthrough[path] = opened.1.backing != nil
      held.append(opened)
    }
    #expect(
      passthrough == [
        "Documents/a/f": false, "Documents/b/f": true, "Documents/cx/f": false, "Documents/d/f": true,
        "Documents/c": true,
      ])
    #expect(files.registered == 3)
    #expect(TestFiles.number(box.status, "passthroughFiles") == 3)
    // A writer joins the passthrough file: passthrough too, but with direct I/O, so its
    // writes come to the daemon (its quota, its set-ID clearing).
    let (node, writer) = try Self.open(box, "Documents/c", flags: O_WRONLY)
    #expect(writer.backing != nil && writer.directIO)
    #expect(try box.write((node, writer.handle), bytes("C"), at: 0) == 1)
    box.fs.release(Sandbox.root, node: node, handle: writer.handle)
    for (node, opened) in held { box.fs.release(Sandbox.root, node: node, handle: opened.handle) }
    #expect(files.registered == 0, "the last handle drops the registration")
    #expect(TestFiles.number(box.status, "passthroughFiles") == 0)
    try box.expectExactBooks()
  }

  @Test(
    "while a handle through the page cache is open, a read-only open is not passthrough (the kernel refuses to mix)",
    .enabled(if: PassthroughSupport.enabled, "needs fanotify's permission events (CAP_SYS_ADMIN)"))
  func noMixing() throws {
    let files = RecordingPassthrough()
    let box = try Sandbox(driver: InMemoryDriver(passthrough: files))
    try box.writeFile("Documents/f", bytes("f"))
    let writer = try box.open("Documents/f", flags: O_RDWR)
    let (_, reader) = try Self.open(box, "Documents/f", flags: O_RDONLY)
    #expect(reader.backing == nil && reader.keepCache)
    box.release(writer)
    box.release((try box.lookup("Documents/f"), reader.handle))
    let (_, later) = try Self.open(box, "Documents/f", flags: O_RDONLY)
    #expect(later.backing != nil, "once they are closed, it is")
    box.release((try box.lookup("Documents/f"), later.handle))
    #expect(files.total == 1)
  }

  @Test(
    "a file stays armed for revocation after its passthrough handles close, until it is forgotten",
    .enabled(if: PassthroughSupport.enabled, "needs fanotify's permission events (CAP_SYS_ADMIN)"))
  func armedUntilForgotten() throws {
    let box = try Sandbox(driver: InMemoryDriver(passthrough: RecordingPassthrough()))
    try box.writeFile("Documents/doc", bytes("doc"))
    func armed() -> Int64 { TestFiles.number(box.status, "passthroughArmed") }
    #expect(armed() == 0)
    for _ in 0..<3 { try box.use("Documents/doc") }
    #expect(armed() == 1, "armed once, and still after the last close")
    let node = try box.lookup("Documents/doc")
    box.fs.forget(node, count: box.lookups(node))
    #expect(armed() == 0, "disarmed with its inode")
  }

  @Test(
    "a file open by passthrough made class A: its passthrough reads are refused from the lock to the unlock",
    .enabled(if: PassthroughSupport.enabled, "needs fanotify's permission events (CAP_SYS_ADMIN)"))
  func revokedAtTheLock() throws {
    let box = try Sandbox(driver: InMemoryDriver(passthrough: RecordingPassthrough()))
    try box.writeFile("Documents/doc", bytes("doc"))
    let (node, opened) = try Self.open(box, "Documents/doc", flags: O_RDONLY)
    #expect(opened.backing != nil)
    try box.protect("Documents/doc", "complete")
    #expect(TestFiles.number(box.status, "passthroughRefused") == 0)
    #expect(box.fs.lock() == .locked)
    #expect(TestFiles.number(box.status, "passthroughRefused") == 1)
    #expect(box.fs.unlock() == .unlocked)
    #expect(TestFiles.number(box.status, "passthroughRefused") == 0)
    box.fs.release(Sandbox.root, node: node, handle: opened.handle)
  }

  @Test(
    "a read-only open racing a change to class A and a lock registers no passthrough: the class and state are looked at again under the file's lock",
    .enabled(if: PassthroughSupport.enabled, "needs fanotify's permission events (CAP_SYS_ADMIN)"))
  func classChangeAndLockDuringOpen() throws {
    let files = HookedPassthrough()
    let box = try Sandbox(driver: InMemoryDriver(passthrough: files))
    try box.writeFile("Documents/doc", bytes("doc"))
    let node = try box.lookup("Documents/doc")
    // After the open read the class (C: open when locked), before it registers the file.
    files.once {
      try? box.protect("Documents/doc", "complete")
      _ = box.fs.lock()
    }
    let opened = try box.fs.open(Sandbox.root, node: node, flags: O_RDONLY)
    #expect(try box.protection("Documents/doc") == "complete")
    #expect(opened.backing == nil, "not passthrough: its reads come to the daemon, which refuses them")
    #expect(files.registered == 0)
    box.fs.release(Sandbox.root, node: node, handle: opened.handle)
  }
}

/// Passthrough that runs a hook once, the next time the filesystem asks whether it is
/// available: in an open, after the file's class was read and before the registration.
final class HookedPassthrough: PassthroughFiles {
  private let recording = RecordingPassthrough()
  private let hook = Mutex<(@Sendable () -> Void)?>(nil)

  /// Runs `body` at the next look at ``isAvailable``.
  func once(_ body: @escaping @Sendable () -> Void) { hook.withLock { $0 = body } }

  var isAvailable: Bool {
    hook.withLock { hook in
      defer { hook = nil }
      return hook
    }?()
    return true
  }

  func register(_ fd: Int32) -> BackingID? { recording.register(fd) }
  func unregister(_ id: BackingID) { recording.unregister(id) }

  /// Registrations not dropped yet.
  var registered: Int { recording.registered }
}
