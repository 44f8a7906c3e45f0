import FilesystemInterface
import Posix
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's own work per request (docs/architecture.md, "Requests per file, and the
/// work in each"): a forget reads a file's status once, and not at all for a file whose
/// last name went through the mount; a mode or a time change goes through the node's
/// `O_PATH` descriptor with an empty path where the kernel takes it, else through
/// `/proc/self/fd`, with the same result either way; a removal does not measure its
/// directory where the backing filesystem never shrinks one (ext4, tmpfs).
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
    "a forget of a file whose last name went through the mount reads nothing, retains nothing, and leaves the books exact",
    arguments: ["Documents", "Library/Caches"])
  func forgetOfUnlinkedFile(directory: String) throws {
    let box = try Sandbox()
    _ = try box.lookup(directory)
    let nodes = box.fs.inodes.count
    let file = try box.create("\(directory)/f")
    #expect(try box.write(file, [UInt8](repeating: 7, count: 10_000)) == 10_000)
    try box.unlink("\(directory)/f")
    // Still open: written after its last name went, then closed.
    #expect(try box.write(file, [UInt8](repeating: 8, count: 20_000), at: 10_000) == 20_000)
    box.release(file)
    let calls = SyscallFaults.inject([:]) { scope in
      box.fs.forget(file.node, count: box.lookups(file.node))
      return scope.calls(.fstat)
    }
    #expect(calls == 0)
    #expect(box.fs.inodes.count == nodes, "the file's node is dropped")
    #expect(box.fs.inodes.retainedCount == 0, "a removed file's handle is stale")
    try box.expectExactBooks()
  }

  @Test("a removed file whose last release could not measure it is measured at its forget: the books come out exact")
  func forgetMeasuresWhatTheReleaseCouldNot() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    #expect(try box.write(file, [UInt8](repeating: 7, count: 10_000)) == 10_000)
    try box.unlink("Documents/f")
    #expect(try box.write(file, [UInt8](repeating: 8, count: 20_000), at: 10_000) == 20_000)
    // Held open, it stayed charged; its last release cannot measure it, so it still is.
    SyscallFaults.inject([.fstat: SyscallFault(.ioError)]) { _ in box.release(file) }
    #expect(box.used > Sandbox.diskUsage(box.backing))
    let calls = SyscallFaults.inject([:]) { scope in
      box.fs.forget(file.node, count: box.lookups(file.node))
      return scope.calls(.fstat)
    }
    #expect(calls == 1)
    try box.expectExactBooks()
  }

  @Test("a file replaced by a rename is forgotten without a read, and the books stay exact")
  func forgetOfReplacedFile() throws {
    let box = try Sandbox()
    try box.makeFile("Library/Caches/a", bytes: 5_000)
    try box.makeFile("Library/Caches/b", bytes: 9_000)
    let target = try box.lookup("Library/Caches/b")
    try box.rename("Library/Caches/a", to: "Library/Caches/b")
    let calls = SyscallFaults.inject([:]) { scope in
      box.fs.forget(target, count: box.lookups(target))
      return scope.calls(.fstat)
    }
    #expect(calls == 0)
    #expect(box.fs.inodes.retainedCount == 0)
    try box.expectExactBooks()
  }

  @Test("a file that keeps another name is still measured, and its handle retained, at its forget")
  func forgetOfFileWithAnotherName() throws {
    let box = try Sandbox()
    try box.makeFile("Documents/f", bytes: 10_000)
    let node = try box.link("Documents/f", as: "Documents/g")
    try box.unlink("Documents/f")
    let calls = SyscallFaults.inject([:]) { scope in
      box.fs.forget(node, count: box.lookups(node))
      return scope.calls(.fstat)
    }
    #expect(calls == 1)
    #expect(box.fs.inodes.retainedCount == 1)
    #expect(try box.lookup("Documents/g") == node, "the retained node comes back under its other name")
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

  /// Removes 300 files (long names, so that the directory spans blocks), a directory and a
  /// file renamed away from `Documents/big`, counting the `fstat`s of descriptors in the
  /// removals (the directory's measurement; the removed names' own status is an `fstatat`).
  private static func removals(in box: Sandbox) throws -> Int {
    let big = try box.mkdir("Documents/big")
    let other = try box.mkdir("Documents/other")
    let names = (0..<300).map { String(repeating: "n", count: 100) + "\($0)" }
    for name in names { box.release(try box.create("Documents/big/" + name)) }
    _ = try box.mkdir("Documents/big/sub")
    box.release(try box.create("Documents/big/moved"))
    let fs = box.fs
    return try SyscallFaults.inject([:]) { scope in
      func removing(_ name: String, _ remove: (FileName) throws(Errno) -> Void) throws {
        try FileName.withBytes(Array(name.utf8)) { (name) throws(Errno) in try remove(name) }
      }
      for name in names {
        try removing(name) { (name) throws(Errno) in try fs.unlink(Sandbox.root, parent: big, name: name) }
      }
      try removing("sub") { (name) throws(Errno) in try fs.rmdir(Sandbox.root, parent: big, name: name) }
      try removing("moved") { (name) throws(Errno) in
        try fs.rename(Sandbox.root, parent: big, name: name, newParent: other, newName: name, flags: 0)
      }
      return scope.calls(.fstat) - 1  // the rename's measurement of the directory it grew
    }
  }

  @Test(
    "a removal measures its directory only where the backing filesystem may shrink one; the books stay exact",
    arguments: [nil, "size=64m"])
  func removalsOfNames(tmpfs: String?) throws {
    let box = try Sandbox(tmpfs: tmpfs)
    let backing = try Sys.openat(AT_FDCWD, box.backing, Linux.openPath | O_CLOEXEC)
    defer { Sys.close(backing) }
    let type = try Sys.filesystemType(backing)
    let keeps = type == 0xEF53 || type == 0x0102_1994  // ext2/3/4, tmpfs
    #expect(box.fs.removalsKeepDirectorySize == keeps)
    if tmpfs != nil { #expect(keeps) }
    let counted = try Self.removals(in: box)
    #expect(counted == (keeps ? 0 : 302))
    try box.expectExactBooks()
  }

  @Test("a backing whose filesystem type cannot be read has every removal's directory measured")
  func removalsWithoutType() throws {
    let box = try SyscallFaults.inject([.fstatfs: SyscallFault(.ioError)]) { _ in try Sandbox(tmpfs: "size=64m") }
    #expect(!box.fs.removalsKeepDirectorySize)
    let counted = try Self.removals(in: box)
    #expect(counted == 302)
    try box.expectExactBooks()
  }
}
