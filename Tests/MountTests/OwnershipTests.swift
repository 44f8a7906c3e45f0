import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// New nodes belong to the calling user; the kernel checks mode bits (default_permissions).
/// Other users reach the mount through `-o allow_other`; they run as uid/gid 65534.
@Suite("Ownership", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct OwnershipTests {
  static let nobody: uid_t = 65534

  /// A mount other users can reach (the fixture's temp root is 0700 otherwise).
  static func sharedMount() throws -> MountFixture {
    let fixture = try MountFixture.unlocked(["-o", "allow_other"])
    try check(chmod(fixture.root, 0o755), "chmod fixture root")
    return fixture
  }

  /// Runs Python `code` (with `a`, `b` = the arguments) as uid/gid 65534; returns "ok" or
  /// the errno's name (e.g. "EACCES").
  static func asNobody(_ code: String, _ arguments: String...) throws -> String {
    let script = """
      import os, sys, errno
      a = sys.argv[1] if len(sys.argv) > 1 else None
      b = sys.argv[2] if len(sys.argv) > 2 else None
      try:
          \(code)
          print("ok")
      except OSError as e:
          print(errno.errorcode.get(e.errno, str(e.errno)))
      """
    let result = try Command.run(
      "/usr/bin/setpriv",
      ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script] + arguments)
    #expect(result.status == 0, "python as nobody: \(result.error)")
    return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
  }

  @Test(
    "a file, directory, symlink and FIFO made by uid 65534 in a 1777 directory belong to 65534, on the mount and in the backing dir"
  )
  func nodesBelongToCaller() throws {
    let fixture = try Self.sharedMount()
    let shared = fixture.path("Documents/shared")
    #expect(mkdir(shared, 0o777) == 0)
    #expect(chmod(shared, 0o1777) == 0)
    #expect(try Self.asNobody("open(a, 'w').write('mine')", shared + "/file") == "ok")
    #expect(try Self.asNobody("os.mkdir(a)", shared + "/dir") == "ok")
    #expect(try Self.asNobody("os.symlink('file', a)", shared + "/link") == "ok")
    #expect(try Self.asNobody("os.mkfifo(a)", shared + "/fifo") == "ok")
    for name in ["file", "dir", "link", "fifo"] {
      let st = try lstatPath(shared + "/" + name)
      #expect(st.st_uid == Self.nobody, "\(name) uid on the mount")
      #expect(st.st_gid == Self.nobody, "\(name) gid on the mount")
      let backing = try lstatPath(fixture.backingPath("Documents/shared/" + name))
      #expect(backing.st_uid == Self.nobody, "\(name) uid in the backing dir")
      #expect(backing.st_gid == Self.nobody, "\(name) gid in the backing dir")
    }
    #expect(try readFile(shared + "/file") == bytes("mine"))
    try fixture.unmount()
  }

  @Test("uid 65534 cannot read a 0600 root file (EACCES), write a 0644 one, or create in a 0755 root directory")
  func permissionDenied() throws {
    let fixture = try Self.sharedMount()
    try writeFile(fixture.path("Documents/secret"), bytes("secret"), mode: 0o600)
    try writeFile(fixture.path("Documents/readonly"), bytes("ro"), mode: 0o644)
    #expect(chmod(fixture.path("Documents/secret"), 0o600) == 0)
    #expect(try Self.asNobody("open(a).read()", fixture.path("Documents/secret")) == "EACCES")
    #expect(try Self.asNobody("open(a, 'a').write('x')", fixture.path("Documents/readonly")) == "EACCES")
    #expect(try Self.asNobody("os.truncate(a, 0)", fixture.path("Documents/readonly")) == "EACCES")
    #expect(try Self.asNobody("open(a, 'r').read()", fixture.path("Documents/readonly")) == "ok")
    #expect(try Self.asNobody("open(a, 'w')", fixture.path("Documents/new")) == "EACCES")
    #expect(try Self.asNobody("os.mkdir(a)", fixture.path("Documents/newdir")) == "EACCES")
    #expect(try Self.asNobody("os.unlink(a)", fixture.path("Documents/readonly")) == "EACCES")
    #expect(try readFile(fixture.path("Documents/readonly")) == bytes("ro"))
    #expect(try directoryNames(fixture.path("Documents")) == ["readonly", "secret"])
    // The shell sees the same.
    let cat = try runAsNobody("cat " + shellQuote(fixture.path("Documents/secret")))
    #expect(cat.status != 0)
    #expect(cat.error.contains("Permission denied"))
    #expect(cat.output.isEmpty)
    try fixture.unmount()
  }

  @Test("uid 65534 cannot chmod or chown root's file (EPERM), nor give its own file away")
  func attributeChangesNeedOwnership() throws {
    let fixture = try Self.sharedMount()
    let shared = fixture.path("tmp/shared")
    #expect(mkdir(shared, 0o777) == 0)
    #expect(chmod(shared, 0o1777) == 0)
    try writeFile(shared + "/roots", [], mode: 0o666)
    #expect(chmod(shared + "/roots", 0o666) == 0)
    #expect(try Self.asNobody("os.chmod(a, 0o777)", shared + "/roots") == "EPERM")
    #expect(try Self.asNobody("os.chown(a, 65534, 65534)", shared + "/roots") == "EPERM")
    #expect(try Self.asNobody("os.utime(a, (1, 1))", shared + "/roots") == "EPERM")
    // UTIME_NOW needs only write permission.
    #expect(try Self.asNobody("os.utime(a, None)", shared + "/roots") == "ok")
    #expect(try statPath(shared + "/roots").st_mode & 0o777 == 0o666)
    #expect(try Self.asNobody("open(a, 'w').close(); os.chmod(a, 0o600)", shared + "/own") == "ok")
    #expect(try statPath(shared + "/own").st_mode & 0o777 == 0o600)
    #expect(try Self.asNobody("os.chown(a, 0, 0)", shared + "/own") == "EPERM")
    #expect(try statPath(shared + "/own").st_uid == Self.nobody)
    try fixture.unmount()
  }

  @Test("the sticky bit: uid 65534 cannot remove or rename root's file in a 1777 directory, but its own")
  func stickyDirectory() throws {
    let fixture = try Self.sharedMount()
    let shared = fixture.path("Library/Caches/shared")
    #expect(mkdir(shared, 0o777) == 0)
    #expect(chmod(shared, 0o1777) == 0)
    try writeFile(shared + "/roots", [])
    #expect(try Self.asNobody("os.unlink(a)", shared + "/roots") == "EPERM")
    #expect(try Self.asNobody("os.rename(a, b)", shared + "/roots", shared + "/stolen") == "EPERM")
    #expect(try Self.asNobody("open(a, 'w').close(); os.unlink(a)", shared + "/own") == "ok")
    #expect(try directoryNames(shared) == ["roots"])
    try fixture.unmount()
  }

  @Test("a set-group-ID directory passes its group to new files and its bit to new directories")
  func setgidDirectory() throws {
    let fixture = try Self.sharedMount()
    let shared = fixture.path("Documents/group")
    #expect(mkdir(shared, 0o777) == 0)
    #expect(chown(shared, 0, 1234) == 0)
    #expect(chmod(shared, 0o2777) == 0)
    #expect(try Self.asNobody("open(a, 'w').close()", shared + "/file") == "ok")
    #expect(try Self.asNobody("os.mkdir(a)", shared + "/dir") == "ok")
    let file = try statPath(shared + "/file")
    #expect(file.st_uid == Self.nobody)
    #expect(file.st_gid == 1234)
    let dir = try statPath(shared + "/dir")
    #expect(dir.st_uid == Self.nobody)
    #expect(dir.st_gid == 1234)
    #expect(dir.st_mode & 0o2000 != 0)
    #expect(try statPath(fixture.backingPath("Documents/group/file")).st_gid == 1234)
    try fixture.unmount()
  }

  @Test("a file chowned to 65534 becomes writable by it, and its writes keep the owner")
  func chownGivesAccess() throws {
    let fixture = try Self.sharedMount()
    let path = fixture.path("Documents/given")
    try writeFile(path, bytes("root"), mode: 0o600)
    #expect(try Self.asNobody("open(a, 'a').write('+nobody')", path) == "EACCES")
    #expect(chown(path, Self.nobody, Self.nobody) == 0)
    #expect(try Self.asNobody("open(a, 'a').write('+nobody')", path) == "ok")
    #expect(try readFile(path) == bytes("root+nobody"))
    #expect(try statPath(fixture.backingPath("Documents/given")).st_uid == Self.nobody)
    try fixture.unmount()
  }

  @Test("a root mount implies allow_other (documented): another user reaches it, and mode bits still apply")
  func rootMountImpliesAllowOther() throws {
    let fixture = try MountFixture.unlocked()
    #expect(chmod(fixture.root, 0o755) == 0)
    let table = MountFixture.mountTable()
    let line = table.split(separator: "\n").first { $0.contains(" \(fixture.mountpoint) ") }
    #expect(line?.contains("allow_other") == true, "\(line ?? "no mount line")")
    #expect(line?.contains("default_permissions") == true)
    try writeFile(fixture.path("Documents/f"), [], mode: 0o644)
    try writeFile(fixture.path("Documents/private"), [], mode: 0o600)
    #expect(try Self.asNobody("os.stat(a)", fixture.path("Documents/f")) == "ok")
    #expect(try Self.asNobody("open(a).read()", fixture.path("Documents/private")) == "EACCES")
    try fixture.unmount()
  }
}
