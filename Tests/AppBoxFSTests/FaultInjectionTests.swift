import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// System calls that fail (errnos injected in Posix's wrappers): each failure is reported
/// as documented and leaves the books exact.
@Suite("Injected syscall failures")
struct FaultInjectionTests {
  @Test("a failed openat of a create passes its errno through and gives the reservation back")
  func createOpenFails() throws {
    let box = try Sandbox()
    let usage = box.usage
    SyscallFaults.inject([.openat: SyscallFault(Errno(rawValue: EROFS), name: "f")]) { faults in
      #expect(throws: Errno(rawValue: EROFS)) { try box.create("Documents/f") }
      #expect(faults.failures(.openat) == 1)
    }
    #expect(!box.backingHas("Documents/f"))
    #expect(box.usage == usage)
    try box.expectExactBooks()
    box.release(try box.create("Documents/f"))  // and it works again
  }

  @Test("a class that cannot be stored undoes the create")
  func protectionAttributeFails() throws {
    let box = try Sandbox()
    _ = try box.mkdir("Documents/a")
    try box.setxattr("Documents/a", "user.appbox.protection", "complete")  // not the default: stored per file
    let usage = box.usage
    SyscallFaults.inject([.setxattr: SyscallFault(.ioError)]) { faults in
      #expect(throws: Errno.ioError) { try box.create("Documents/a/f") }
      #expect(faults.failures(.setxattr) == 1)
    }
    #expect(!box.backingHas("Documents/a/f"), "no file left without its class")
    #expect(box.usage == usage)
    try box.expectExactBooks()
  }

  @Test("a failed credential switch refuses with EIO and creates nothing", .enabled(if: geteuid() == 0))
  func credentialSwitchFails() throws {
    let box = try Sandbox()
    _ = try box.mkdir("tmp/shared")
    try Sys.chmod(box.backing + "/tmp/shared", 0o777)
    let other = Caller(uid: 65534, gid: 65534, pid: getpid(), umask: 0o022)
    SyscallFaults.inject([.setfsuid: SyscallFault(.notPermitted)]) { _ in
      #expect(throws: Errno.ioError) { try box.create("tmp/shared/f", as: other) }
    }
    #expect(!box.backingHas("tmp/shared/f"))
    try box.expectExactBooks()
    // Without the fault the file is the caller's.
    box.release(try box.create("tmp/shared/f", as: other))
    #expect(try Sys.lstatPath(box.backing + "/tmp/shared/f").st_uid == 65534)
  }

  @Test("a failed fstat after a write is measured again at release")
  func measureFails() throws {
    let box = try Sandbox()
    let file = try box.create("Library/Caches/f")
    try SyscallFaults.inject([.fstat: SyscallFault(.ioError, times: 1)]) { faults throws in
      #expect(try box.write(file, [UInt8](repeating: 1, count: 64 * 1024)) == 64 * 1024)
      #expect(faults.failures(.fstat) == 1)
    }
    box.release(file)
    try box.expectExactBooks()
  }

  /// Makes a tmp file with a name no other test uses, and returns the name: a purge
  /// unlinks on worker threads, so its fault is process-wide, on this name only.
  static func makeVictim(in box: Sandbox, bytes: Int) throws(Errno) -> String {
    let victim = "victim-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    try box.makeFile("tmp/\(victim)", bytes: bytes)
    return victim
  }

  @Test("a victim whose unlink fails stays, on the books and in the catalog; the next purge takes it")
  func purgeUnlinkFails() throws {
    let box = try Sandbox()
    let victim = try Self.makeVictim(in: box, bytes: 64 * 1024)
    try box.makeFile("tmp/other", bytes: 64 * 1024)
    let result = SyscallFaults.injectEverywhere([.unlinkat: SyscallFault(.busy, name: victim)]) { faults in
      defer { #expect(faults.failures(.unlinkat) == 1) }
      return box.fs.purge(.domain(.tmp))
    }
    #expect(result.files == 1)
    #expect(box.backingHas("tmp/\(victim)") && !box.backingHas("tmp/other"))
    #expect(box.events("purge").count == 1, "only what was unlinked is an event")
    try box.expectExactBooks()

    #expect(box.fs.purge(.domain(.tmp)).files == 1)
    #expect(!box.backingHas("tmp/\(victim)"))
    try box.expectExactBooks()
  }

  @Test("under pressure, a victim whose unlink fails is kept and the next one purged in its place")
  func pressurePurgeUnlinkFails() throws {
    let box = try Sandbox()
    let victim = try Self.makeVictim(in: box, bytes: 256 * 1024)
    try box.makeFile("Library/Caches/c", bytes: 256 * 1024)
    _ = box.fs.resize(to: box.used + 64 * 1024, reason: .resize)
    let document = try box.create("Documents/d")
    let outcome = SyscallFaults.injectEverywhere([.unlinkat: SyscallFault(.busy, name: victim)]) { faults in
      defer { #expect(faults.failures(.unlinkat) == 1, "the failed victim is not tried twice") }
      return Result { () throws(Errno) in try box.write(document, [UInt8](repeating: 1, count: 128 * 1024)) }
    }
    box.release(document)
    // The purge chose the tmp file alone (enough on paper); with it kept, the write
    // plans again without it and purges the Caches file.
    #expect(box.backingHas("tmp/\(victim)"), "kept")
    #expect(!box.backingHas("Library/Caches/c"), "purged in its place")
    #expect((try? outcome.get()) == 128 * 1024)
    #expect(box.events("purge").count == 1)
    try box.expectExactBooks()
  }

  @Test("a fault applies only to the scope that injected it, and after N calls")
  func scopes() throws {
    let box = try Sandbox()
    try SyscallFaults.inject([.fstat: SyscallFault(.ioError, after: 1, times: 1)]) { faults throws in
      let fd = try Sys.open(box.backing, O_RDONLY | O_DIRECTORY)
      defer { Sys.close(fd) }
      _ = try Sys.fstat(fd)  // the first call passes
      #expect(throws: Errno.ioError) { try Sys.fstat(fd) }
      _ = try Sys.fstat(fd)  // one failure only
      #expect(faults.calls(.fstat) == 3)
    }
  }
}
