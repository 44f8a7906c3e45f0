import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// Every system call the filesystem makes on create, write, truncate, rename, unlink,
/// setxattr, open, lookup and purge, failing (errnos injected in Posix's wrappers): the
/// error is answered, nothing is left half done, and the books stay exact.
@Suite("Error paths through the fault seam")
struct ErrorPathTests {
  /// A name no other test uses, for faults that must be process-wide (a purge unlinks on
  /// worker threads, where the test's own scope does not reach).
  static func uniqueName(_ prefix: String) -> String { "\(prefix)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))" }

  /// A sandbox with a class-A directory `Documents/a` (its files store their class).
  static func classified() throws -> Sandbox {
    let box = try Sandbox()
    try box.mkdir("Documents/a")
    try box.protect("Documents/a", "complete")
    return box
  }

  // MARK: Creating

  @Test("create: the lookup after the file was made fails (openat): the file is removed, not left without its class")
  func createLookupOpenFails() throws {
    let box = try Self.classified()
    SyscallFaults.inject([.openat: SyscallFault(.ioError, after: 1, name: "f")]) { faults in
      #expect(throws: Errno.ioError) { try box.create("Documents/a/f") }
      #expect(faults.failures(.openat) == 1)
    }
    #expect(!box.backingHas("Documents/a/f"), "no file of the default class in a class-A directory")
    try box.expectExactBooks()
    box.release(try box.create("Documents/a/f"))
    #expect(try box.protection("Documents/a/f") == "complete")
  }

  @Test("create: the lookup's fstat after the file was made fails: the file is removed")
  func createLookupStatFails() throws {
    let box = try Self.classified()
    let documents = try box.lookup("Documents/a")
    SyscallFaults.inject([.fstat: SyscallFault(.ioError, times: 1)]) { faults in
      #expect(throws: Errno.ioError) {
        try FileName.withBytes(bytes("f")) { (name) throws(Errno) in
          _ = try box.fs.create(Sandbox.root, parent: documents, name: name, mode: 0o644, flags: O_RDWR | O_EXCL)
        }
      }
      #expect(faults.failures(.fstat) == 1)
    }
    #expect(!box.backingHas("Documents/a/f"))
    try box.expectExactBooks()
  }

  @Test("mkdir: mkdirat fails: the error passes, nothing is created, the reservations go back")
  func mkdirFails() throws {
    let box = try Sandbox()
    let usage = box.usage
    SyscallFaults.inject([.mkdirat: SyscallFault(.noSpace, name: "d")]) { _ in
      #expect(throws: Errno.noSpace) { try box.mkdir("Documents/d") }
    }
    #expect(!box.backingHas("Documents/d"))
    #expect(box.usage == usage)
    try box.expectExactBooks()
  }

  @Test("mkdir: the lookup after the directory was made fails: the directory is removed, not left without its class")
  func mkdirLookupFails() throws {
    let box = try Self.classified()
    SyscallFaults.inject([.openat: SyscallFault(.ioError, name: "d")]) { _ in
      #expect(throws: Errno.ioError) { try box.mkdir("Documents/a/d") }
    }
    #expect(!box.backingHas("Documents/a/d"))
    try box.expectExactBooks()
  }

  @Test("mkdir: the class of the new directory cannot be stored: it is removed")
  func mkdirClassFails() throws {
    let box = try Self.classified()
    SyscallFaults.inject([.setxattr: SyscallFault(.noSpace)]) { _ in
      #expect(throws: Errno.noSpace) { try box.mkdir("Documents/a/d") }
    }
    #expect(!box.backingHas("Documents/a/d"))
    try box.expectExactBooks()
  }

  @Test("mknod, symlink and link: their syscall fails: the error passes, nothing is created, nothing is charged")
  func nodesFail() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/target", pattern(10_000))
    let usage = box.usage
    SyscallFaults.inject([
      .mknodat: SyscallFault(.readOnlyFileSystem), .symlinkat: SyscallFault(.readOnlyFileSystem),
      .linkat: SyscallFault(.readOnlyFileSystem),
    ]) { _ in
      #expect(throws: Errno.readOnlyFileSystem) { try box.mknod("tmp/fifo", mode: S_IFIFO | 0o644) }
      #expect(throws: Errno.readOnlyFileSystem) { try box.symlink("target", at: "tmp/link") }
      #expect(throws: Errno.readOnlyFileSystem) { try box.link("tmp/target", as: "tmp/hard") }
    }
    #expect(box.backingList("tmp") == ["target"])
    #expect(box.usage == usage)
    #expect(box.purgeableFiles == 1, "a failed link leaves the file purgeable")
    try box.expectExactBooks()
  }

  @Test("mknod of a regular file whose class cannot be stored: removed")
  func mknodClassFails() throws {
    let box = try Self.classified()
    SyscallFaults.inject([.setxattr: SyscallFault(.ioError)]) { _ in
      #expect(throws: Errno.ioError) { try box.mknod("Documents/a/n", mode: S_IFREG | 0o644) }
    }
    #expect(!box.backingHas("Documents/a/n"))
    try box.expectExactBooks()
  }

  // MARK: Data

  @Test("write: the copy fails part-way: what it allocated is charged, the reservation settled")
  func writeFailsPartWay() throws {
    let box = try Sandbox()
    let file = try box.create("tmp/f")
    let data = FailingWriteData(bytes: pattern(300_000), written: 100_000, error: .ioError)
    #expect(throws: Errno.ioError) {
      try box.fs.write(Sandbox.root, node: file.node, handle: file.handle, data: data, offset: 0)
    }
    try box.expectExactBooks()
    box.release(file)
    try box.expectExactBooks()
  }

  @Test("write: nothing fits and nothing is written: the whole reservation goes back")
  func writeFailsAtOnce() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    let used = box.used
    let data = FailingWriteData(bytes: pattern(1 << 20), written: 0, error: .noSpace)
    #expect(throws: Errno.noSpace) {
      try box.fs.write(Sandbox.root, node: file.node, handle: file.handle, data: data, offset: 0)
    }
    #expect(box.used == used)
    box.release(file)
    try box.expectExactBooks()
  }

  @Test("a failed fstat after a write and again at release: the next measurement (the forget) charges it all")
  func measureFailsTwice() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    try SyscallFaults.inject([.fstat: SyscallFault(.ioError, times: 2)]) { faults throws in
      #expect(try box.write(file, pattern(200_000)) == 200_000)
      box.release(file)
      #expect(faults.failures(.fstat) == 2)
    }
    box.fs.forget(file.node, count: box.lookups(file.node))
    try box.expectExactBooks()
  }

  @Test("truncate: ftruncate fails by path and through a handle: the error passes, the file and books unchanged")
  func truncateFails() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", pattern(300_000))
    let file = try box.open("Documents/f", flags: O_RDWR)
    SyscallFaults.inject([.ftruncate: SyscallFault(.ioError)]) { faults in
      #expect(throws: Errno.ioError) { try box.truncate("Documents/f", to: 10) }
      #expect(throws: Errno.ioError) { try box.truncate(file, to: 10) }
      #expect(faults.failures(.ftruncate) == 2)
    }
    #expect(try box.backingStat("Documents/f").st_size == 300_000)
    try box.expectExactBooks()
    box.release(file)
  }

  @Test("truncate by path: the writable descriptor cannot be opened: the error passes")
  func truncateReopenFails() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", pattern(300_000))
    let node = try box.lookup("Documents/f")
    SyscallFaults.inject([.openat: SyscallFault(.accessDenied)]) { _ in
      var attributes = stat()
      attributes.st_size = 0
      #expect(throws: Errno.accessDenied) {
        _ = try box.fs.setattr(Sandbox.root, node: node, attributes: attributes, fields: .size, handle: nil)
      }
    }
    #expect(try box.backingStat("Documents/f").st_size == 300_000)
    try box.expectExactBooks()
  }

  @Test("fallocate fails: the error passes, the reservation settled")
  func fallocateFails() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    let used = box.used
    SyscallFaults.inject([.fallocate: SyscallFault(.notSupported)]) { _ in
      #expect(throws: Errno.notSupported) { try box.fallocate(file, offset: 0, length: 1 << 20) }
    }
    #expect(box.used == used)
    box.release(file)
    try box.expectExactBooks()
  }

  @Test("copy_file_range fails: the error passes, the reservation settled")
  func copyFails() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/source", pattern(100_000))
    let source = try box.open("Documents/source")
    let target = try box.create("Documents/target")
    SyscallFaults.inject([.copyFileRange: SyscallFault(.crossDevice)]) { _ in
      #expect(throws: Errno.crossDevice) { try box.copy(from: source, to: target, count: 100_000) }
    }
    box.release(source)
    box.release(target)
    #expect(try box.backingStat("Documents/target").st_size == 0)
    try box.expectExactBooks()
  }

  // MARK: Open and lookup

  @Test("open: the backing file cannot be opened: the error passes and the file is not left pinned")
  func openFails() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/f", pattern(10_000))
    let node = try box.lookup("tmp/f")
    SyscallFaults.inject([.openat: SyscallFault(.accessDenied)]) { _ in
      #expect(throws: Errno.accessDenied) { try box.fs.open(Sandbox.root, node: node, flags: O_RDONLY) }
      #expect(throws: Errno.accessDenied) { try box.fs.open(Sandbox.root, node: node, flags: O_WRONLY | O_TRUNC) }
    }
    #expect(try box.backingStat("tmp/f").st_size == 10_000, "a failed O_TRUNC open truncates nothing")
    guard case .held(let inode) = box.fs.inodes.resolve(node) else { throw Errno.stale }
    #expect(inode.openHandles.load(ordering: .relaxed) == 0)
    #expect(box.fs.purge(.domain(.tmp)).files == 1, "purgeable: no pin was left")
  }

  @Test("lookup: openat fails with EACCES (passed on) or ENOENT (a negative entry); fstat fails (passed on)")
  func lookupFails() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    let documents = try box.lookup("Documents")
    let held = box.fs.inodes.count
    SyscallFaults.inject([.openat: SyscallFault(.accessDenied, name: "f")]) { _ in
      #expect(throws: Errno.accessDenied) { try box.lookup("Documents/f") }
    }
    let negative = try FileName.withBytes(bytes("missing")) { (name) throws(Errno) in
      try box.fs.lookup(Sandbox.root, parent: documents, name: name)
    }
    #expect(negative.node.rawValue == 0 && negative.entryTimeout > 0, "a negative entry the kernel may cache")
    SyscallFaults.inject([.fstat: SyscallFault(.ioError)]) { _ in
      #expect(throws: Errno.ioError) { try box.lookup("Documents/f") }
    }
    #expect(box.fs.inodes.count == held, "no node made, no descriptor kept")
  }

  @Test("out of descriptors (EMFILE), a lookup hands the device off, asks the kernel to drop idle nodes, and retries")
  func descriptorsRunOut() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    let handOffs = box.driver.handOffCount
    try SyscallFaults.inject([.openat: SyscallFault(.tooManyOpenFiles, times: 3, name: "f")]) { faults throws in
      _ = try box.lookup("Documents/f")
      #expect(faults.failures(.openat) == 3)
    }
    #expect(box.driver.handOffCount > handOffs, "another worker may read the forgets meanwhile")
    #expect(box.eventually { box.notifier.calls.contains { if case .invalidateEntry = $0 { true } else { false } } })
  }

  @Test("opendir fails: the error passes")
  func opendirFails() throws {
    let box = try Sandbox()
    let documents = try box.lookup("Documents")
    SyscallFaults.inject([.openat: SyscallFault(.accessDenied)]) { _ in
      #expect(throws: Errno.accessDenied) { try box.fs.opendir(Sandbox.root, node: documents, flags: O_RDONLY) }
    }
    #expect(try box.list("Documents") == [])
  }

  // MARK: Names

  @Test("rename: renameat2 fails: the error passes, both names and the books unchanged")
  func renameFails() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/a", pattern(10_000))
    try box.writeFile("Documents/b", pattern(20_000))
    let usage = box.usage
    SyscallFaults.inject([.renameat2: SyscallFault(.ioError)]) { _ in
      #expect(throws: Errno.ioError) { try box.rename("tmp/a", to: "Documents/a") }
      #expect(throws: Errno.ioError) { try box.rename("tmp/a", to: "Documents/b") }
      #expect(throws: Errno.ioError) { try box.rename("tmp/a", to: "Documents/b", flags: Linux.renameExchange) }
    }
    #expect(box.usage == usage)
    #expect(box.backingHas("tmp/a") && box.backingHas("Documents/b") && !box.backingHas("Documents/a"))
    #expect(box.fs.purge(.domain(.tmp)).files == 1, "still tmp's")
    try box.expectExactBooks()
  }

  @Test("rename of a directory across domains: renameat2 fails: nothing moves, and purges go on in it")
  func directoryMoveFails() throws {
    let box = try Sandbox()
    try box.mkdir("tmp/d")
    try box.writeFile("tmp/d/f", pattern(10_000))
    SyscallFaults.inject([.renameat2: SyscallFault(.ioError)]) { _ in
      #expect(throws: Errno.ioError) { try box.rename("tmp/d", to: "Documents/d") }
    }
    #expect(box.fs.storage.books.withLock { $0.moving.isEmpty }, "the move ended")
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.tmp)).files == 1)
    try box.expectExactBooks()
  }

  @Test("rename of a directory across domains: its subtree cannot be walked: refused before anything moves")
  func directoryMoveWalkFails() throws {
    let box = try Sandbox()
    try box.mkdir("tmp/d")
    try box.mkdir("tmp/d/e")
    try box.writeFile("tmp/d/e/f", pattern(10_000))
    SyscallFaults.inject([.fstatat: SyscallFault(.ioError, name: "f")]) { _ in
      #expect(throws: Errno.ioError) { try box.rename("tmp/d", to: "Documents/d") }
    }
    #expect(box.backingHas("tmp/d/e/f") && !box.backingHas("Documents/d"))
    try box.expectExactBooks()
  }

  @Test("rename: the source cannot be looked at (fstatat): the error passes, nothing renamed")
  func renameStatFails() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/a", pattern(10_000))
    SyscallFaults.inject([.fstatat: SyscallFault(.ioError, name: "a")]) { _ in
      #expect(throws: Errno.ioError) { try box.rename("tmp/a", to: "tmp/b") }
    }
    #expect(box.backingHas("tmp/a") && !box.backingHas("tmp/b"))
    try box.expectExactBooks()
  }

  @Test("unlink: fstatat or unlinkat fails: the error passes, the file stays on the books and purgeable")
  func unlinkFails() throws {
    let box = try Sandbox()
    try box.writeFile("Library/Caches/f", pattern(10_000))
    let usage = box.usage
    SyscallFaults.inject([.fstatat: SyscallFault(.ioError, times: 1, name: "f")]) { _ in
      #expect(throws: Errno.ioError) { try box.unlink("Library/Caches/f") }
    }
    SyscallFaults.inject([.unlinkat: SyscallFault(.busy, name: "f")]) { _ in
      #expect(throws: Errno.busy) { try box.unlink("Library/Caches/f") }
    }
    #expect(box.usage == usage)
    #expect(box.purgeableFiles == 1)
    try box.expectExactBooks()
    try box.unlink("Library/Caches/f")
    try box.expectExactBooks()
  }

  @Test("rmdir: unlinkat fails: the directory stays, with its books")
  func rmdirFails() throws {
    let box = try Sandbox()
    try box.mkdir("Library/Caches/d")
    SyscallFaults.inject([.unlinkat: SyscallFault(.busy, name: "d")]) { _ in
      #expect(throws: Errno.busy) { try box.rmdir("Library/Caches/d") }
    }
    try box.writeFile("Library/Caches/d/f", pattern(1000))  // still on the catalog: its files are purgeable
    #expect(box.fs.purge(.domain(.caches)).files == 1)
    try box.expectExactBooks()
  }

  // MARK: Attributes

  @Test("setxattr fails: the error passes, no attribute, the reservation settled")
  func setxattrFails() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    let used = box.used
    SyscallFaults.inject([.setxattr: SyscallFault(.noSpace)]) { _ in
      #expect(throws: Errno.noSpace) { try box.setxattr("Documents/f", "user.big", bytes: pattern(3000)) }
    }
    #expect(box.used == used)
    #expect(try box.listxattr("Documents/f") == [])
    try box.expectExactBooks()
  }

  @Test("a class that cannot be stored leaves the file's class as it was, stored and as the filesystem judges it")
  func classChangeFails() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    SyscallFaults.inject([.setxattr: SyscallFault(.ioError)]) { _ in
      #expect(throws: Errno.ioError) { try box.protect("Documents/f", "complete") }
    }
    #expect(try box.protection("Documents/f") == "completeUntilFirstUserAuthentication")
    #expect(box.fs.lock() == .locked)
    box.release(try box.open("Documents/f"))  // still class C's: open while LOCKED
  }

  @Test("a purge urgency that cannot be stored leaves the purge order as it was")
  func urgencyChangeFails() throws {
    let box = try Sandbox()
    try box.writeFile("Library/Caches/old", [1])
    try box.writeFile("Library/Caches/new", [1])
    SyscallFaults.inject([.setxattr: SyscallFault(.ioError)]) { _ in
      #expect(throws: Errno.ioError) {
        try box.setxattr("Library/Caches/new", AppBoxAttribute.purgeUrgency.name, "high")
      }
    }
    #expect(box.fs.purge(.bytes(1)).files == 1)
    #expect(box.purgedPaths() == ["Library/Caches/old"])
  }

  @Test("removexattr fails: the attribute (or the class) stays, the books exact")
  func removexattrFails() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    try box.setxattr("Documents/f", "user.big", bytes: pattern(3000))
    try box.protect("Documents/f", "none")
    SyscallFaults.inject([.removexattr: SyscallFault(.ioError)]) { faults in
      #expect(throws: Errno.ioError) { try box.removexattr("Documents/f", "user.big") }
      #expect(throws: Errno.ioError) { try box.removexattr("Documents/f", AppBoxAttribute.protection.name) }
      #expect(faults.failures(.removexattr) == 2)
    }
    #expect(try box.getxattr("Documents/f", "user.big") == pattern(3000))
    #expect(try box.protection("Documents/f") == "none")
    try box.expectExactBooks()
  }

  // MARK: Purges

  @Test("a victim that cannot be looked at (fstatat) goes back on the catalog; the next purge takes it")
  func purgeStatFails() throws {
    let box = try Sandbox()
    let victim = Self.uniqueName("victim")
    try box.writeFile("tmp/" + victim, pattern(10_000))
    let result = SyscallFaults.injectEverywhere([.fstatat: SyscallFault(.ioError, name: victim)]) { faults in
      defer { #expect(faults.failures(.fstatat) == 1) }
      return box.fs.purge(.domain(.tmp))
    }
    #expect(result.files == 0)
    #expect(box.purgeableFiles == 1)
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.tmp)).files == 1)
    try box.expectExactBooks()
  }

  @Test("a victim's directory that cannot be opened: its victims go back on the catalog, the others are purged")
  func purgeDirectoryFails() throws {
    let box = try Sandbox()
    let directory = Self.uniqueName("dir")
    try box.mkdir("tmp/" + directory)
    try box.writeFile("tmp/\(directory)/inside", pattern(10_000))
    try box.writeFile("tmp/outside", pattern(10_000))
    let result = SyscallFaults.injectEverywhere([.openat: SyscallFault(.ioError, name: directory)]) { _ in
      box.fs.purge(.domain(.tmp))
    }
    #expect(result.files == 1)
    #expect(box.backingHas("tmp/\(directory)/inside") && !box.backingHas("tmp/outside"))
    #expect(box.purgeableFiles == 1)
    try box.expectExactBooks()
  }

  @Test("a shrink whose purge cannot unlink: the sandbox stays above its capacity and allocations get ENOSPC")
  func shrinkUnlinkFails() throws {
    let box = try Sandbox()
    let victim = Self.uniqueName("victim")
    try box.writeFile("tmp/" + victim, pattern(mib))
    SyscallFaults.injectEverywhere([.unlinkat: SyscallFault(.busy, name: victim)]) { _ in
      let resized = box.fs.resize(to: 512 << 10, reason: .resize)
      #expect(resized.files == 0 && resized.used > resized.to)
      #expect(box.free == 0)
      #expect(throws: Errno.noSpace) { try box.mkdir("Documents/d") }
    }
    try box.expectExactBooks()
    try box.mkdir("Documents/d")  // unlinks work again: the next allocation purges it
    #expect(!box.backingHas("tmp/" + victim))
    try box.expectExactBooks()
  }

  // MARK: Mounting

  @Test("the mount's index cannot read an entry: the filesystem is not made (the books would be wrong)")
  func indexFails() throws {
    let name = Self.uniqueName("entry")
    #expect(throws: SandboxSetupError.system(.ioError)) {
      try SyscallFaults.inject([.fstatat: SyscallFault(.ioError, name: name)]) { _ throws in
        _ = try Sandbox(prepare: { backing in
          try Sys.mkdir(backing + "/Documents", 0o755)
          try TestFiles.write(backing + "/Documents/" + name, [1])
        })
      }
    }
  }

  @Test("the default class cannot be recorded on the backing root: the filesystem is not made")
  func defaultRecordFails() throws {
    #expect(throws: SandboxSetupError.system(.noSpace)) {
      try SyscallFaults.inject([.setxattr: SyscallFault(.noSpace)]) { _ throws in _ = try Sandbox() }
    }
  }

  @Test("the fixed layout cannot be made: the filesystem is not made")
  func layoutFails() throws {
    #expect(throws: SandboxSetupError.system(.readOnlyFileSystem)) {
      try SyscallFaults.inject([.mkdirat: SyscallFault(.readOnlyFileSystem, name: "tmp")]) { _ throws in
        _ = try Sandbox()
      }
    }
  }
}
