import FilesystemInterface
import Posix
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's own work per request (docs/architecture.md, "Less work per request"): a
/// forget reads a file's status once; a mode or a time change goes through the node's
/// `O_PATH` descriptor with an empty path where the kernel takes it, else through
/// `/proc/self/fd`, with the same result either way.
@Suite("Work per request")
struct RequestWorkTests {
  @Test("a forget reads the file's status once, for its retained handle and its last measurement both")
  func forgetReadsStatusOnce() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    #expect(try box.write(file, [UInt8](repeating: 7, count: 10_000)) == 10_000)
    box.release(file)
    let calls = SyscallFaults.inject([:]) { scope in
      box.fs.forget(file.node, count: box.lookups(file.node))
      return scope.calls(.fstat)
    }
    #expect(calls == 1)
    #expect(box.fs.inodes.count == 1, "only the root is left")
    try box.expectExactBooks()
  }

  @Test(
    "mode and time changes of a file come out the same through the empty path and through /proc",
    arguments: [true, false])
  func modeAndTimes(emptyPath: Bool) throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    box.release(file)
    // Another test may meanwhile take the /proc path too: it gives the same result.
    EmptyPathCalls.fchmodat2.store(emptyPath, ordering: .relaxed)
    EmptyPathCalls.utimensat.store(emptyPath, ordering: .relaxed)
    defer {
      EmptyPathCalls.fchmodat2.store(true, ordering: .relaxed)
      EmptyPathCalls.utimensat.store(true, ordering: .relaxed)
    }
    var attributes = stat()
    attributes.st_mode = S_IFREG | 0o600
    attributes.st_atim = timespec(tv_sec: 1_000_000, tv_nsec: 5)
    attributes.st_mtim = timespec(tv_sec: 2_000_000, tv_nsec: 7)
    let replied = try box.fs.setattr(
      Sandbox.root, node: file.node, attributes: attributes, fields: [.mode, .atime, .mtime], handle: nil)
    let backing = try box.backingStat("Documents/f")
    for st in [replied, backing] {
      #expect(st.st_mode & 0o7777 == 0o600)
      #expect(st.st_atim.tv_sec == 1_000_000 && st.st_atim.tv_nsec == 5)
      #expect(st.st_mtim.tv_sec == 2_000_000 && st.st_mtim.tv_nsec == 7)
    }
  }
}
