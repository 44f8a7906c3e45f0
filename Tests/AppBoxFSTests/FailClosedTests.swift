import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// Errors met on a security or quota path are decisions: they refuse, or charge the worst
/// case, and are logged and counted; none is taken for "absent".
@Suite("Errors on security and quota paths fail closed")
struct FailClosedTests {
  @Test("a file that cannot be measured after a write stays charged with what was reserved for it")
  func unmeasuredWriteStaysCharged() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    try SyscallFaults.inject([.fstat: SyscallFault(.ioError, times: 1)]) { faults throws in
      #expect(try box.write(file, [UInt8](repeating: 1, count: 256 * 1024)) == 256 * 1024)
      #expect(faults.failures(.fstat) == 1)
    }
    #expect(box.used >= Sandbox.diskUsage(box.backing), "never below what the files hold")
    #expect(box.fs.internalErrors.count(at: .measure) == 1)
    box.release(file)  // measured again: exact
    try box.expectExactBooks()
  }

  @Test("a release whose write-back fails still measures the file, and the error is counted")
  func writebackNotStarted() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    // Past a hole: a file whose write-back the release waits for.
    #expect(try box.write(file, [UInt8](repeating: 1, count: 64 * 1024), at: 64 * 1024) == 64 * 1024)
    SyscallFaults.inject([.syncFileRange: SyscallFault(.ioError, times: 1)]) { faults in
      box.release(file)
      #expect(faults.failures(.syncFileRange) == 1)
    }
    #expect(box.fs.internalErrors.count(at: .writeback) == 1)
    #expect(box.used == Sandbox.diskUsage(box.backing))
  }

  @Test("a rename whose target cannot be looked at is refused with that error; nothing moves")
  func renameTargetUnreadable() throws {
    let box = try Sandbox()
    try box.makeFile("tmp/a", bytes: 4096)
    try box.makeFile("Documents/b", bytes: 4096)
    SyscallFaults.inject([.fstatat: SyscallFault(.ioError, times: 1, name: "b")]) { faults in
      #expect(throws: Errno.ioError) { try box.rename("tmp/a", to: "Documents/b") }
      #expect(faults.failures(.fstatat) == 1)
    }
    #expect(box.backingHas("tmp/a") && box.backingHas("Documents/b"))
    try box.expectExactBooks()
  }

  @Test("an open of a hard-linked Caches file that cannot be looked at is refused, not opened blind")
  func untrackedOpenUnreadable() throws {
    let box = try Sandbox()
    try box.makeFile("Library/Caches/a", bytes: 4096)
    let node = try box.lookup("Library/Caches/a")
    let caches = try box.lookup("Library/Caches")
    _ = try FileName.withBytes(Array("b".utf8)) { (name) throws(Errno) in
      try box.fs.link(Sandbox.root, node: node, newParent: caches, newName: name)
    }
    SyscallFaults.inject([.fstat: SyscallFault(.ioError, times: 1)]) { faults in
      #expect(throws: Errno.ioError) { try box.fs.open(Sandbox.root, node: node, flags: O_RDONLY) }
      #expect(faults.failures(.fstat) == 1)
    }
    #expect(box.fs.inodes.inode(node).openHandles.load(ordering: .relaxed) == 0, "not left pinned")
    box.release((node, try box.fs.open(Sandbox.root, node: node, flags: O_RDONLY).handle))
    try box.expectExactBooks()
  }

  @Test("a directory moving to another domain that cannot be looked at keeps its error (not ENOENT)")
  func movingSubtreeUnreadable() throws {
    let box = try Sandbox()
    _ = try box.mkdir("Library/Caches/d")
    try box.makeFile("Library/Caches/d/f", bytes: 4096)
    let (from, name) = try box.parent(of: "Library/Caches/d")
    let to = try box.lookup("Documents")
    try FileName.withBytes(name) { (name) throws(Errno) in
      SyscallFaults.inject([.fstat: SyscallFault(.ioError, times: 1)]) { faults in
        #expect(throws: Errno.ioError) {
          try box.fs.rename(Sandbox.root, parent: from, name: name, newParent: to, newName: name, flags: 0)
        }
        #expect(faults.failures(.fstat) == 1)
      }
    }
    #expect(box.backingHas("Library/Caches/d/f"))
    try box.expectExactBooks()
  }

  @Test("a purge that cannot open a victim's directory keeps its files, purgeable, and counts the error")
  func purgeDirectoryUnopenable() throws {
    let box = try Sandbox()
    let directory = "d-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"  // a name no other test uses
    _ = try box.mkdir("tmp/\(directory)")
    try box.makeFile("tmp/\(directory)/f", bytes: 64 * 1024)
    let result = SyscallFaults.injectEverywhere([.openat: SyscallFault(.ioError, name: directory)]) { _ in
      box.fs.purge(.domain(.tmp))
    }
    #expect(result.files == 0)
    #expect(box.backingHas("tmp/\(directory)/f"))
    #expect(box.fs.internalErrors.count(at: .purgeDirectory) == 1)
    #expect(box.fs.statusJSON().contains("\"purgeDirectory\":1"))
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.tmp)).files == 1, "purgeable again")
  }
}
