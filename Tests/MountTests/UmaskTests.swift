import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A new file's mode as on a local ext4 directory: the caller's umask, except under a
/// default ACL, whose entries decide instead.
@Suite("Umask and default ACLs", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct UmaskTests {
  /// Creates a file, a directory and a FIFO in `directory` under `umask` (as uid 65534
  /// when `asNobody`) and returns their modes, in that order, as octal text.
  static func createdModes(in directory: String, umask: String, asNobody: Bool) throws -> String {
    let script = """
      import os, sys
      d = sys.argv[1]
      os.umask(int(sys.argv[2], 8))
      os.close(os.open(d + "/file", os.O_CREAT | os.O_WRONLY, 0o666))
      os.mkdir(d + "/dir", 0o777)
      os.mkfifo(d + "/fifo", 0o666)
      print(" ".join(oct(os.lstat(d + "/" + n).st_mode & 0o7777) for n in ("file", "dir", "fifo")))
      """
    let identity = asNobody ? ["--reuid=65534", "--regid=65534", "--clear-groups"] : ["--reuid=0"]
    let result = try Command.run("/usr/bin/setpriv", identity + ["/usr/bin/python3", "-c", script, directory, umask])
    guard result.status == 0 else { throw FixtureError("creating in \(directory): \(result.error)") }
    return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
  }

  @Test(
    "modes of new files, directories and FIFOs match ext4, with and without a default ACL, as root and as another user",
    arguments: [("077", false), ("022", true), ("077", true), ("027", false)])
  func modesMatchLocalDirectory(umask: String, defaultACL: Bool) throws {
    let fixture = try MountFixture.unlocked(["-o", "allow_other"])
    try check(chmod(fixture.root, 0o755), "chmod fixture root")
    for asNobody in [false, true] {
      let name = "\(asNobody ? "nobody" : "root")-\(umask)-\(defaultACL ? "acl" : "plain")"
      let local = fixture.root + "/local-" + name
      let mounted = fixture.path("Documents/" + name)
      for directory in [local, mounted] {
        try check(mkdir(directory, 0o777), "mkdir \(directory)")
        try check(chmod(directory, 0o777), "chmod \(directory)")
        if defaultACL {
          let acl = try Command.run("/usr/bin/setfacl", ["-d", "-m", "u::rwx,g::rwx,o::rwx", directory])
          try #require(acl.status == 0, "setfacl \(directory): \(acl.error)")
        }
      }
      let expected = try Self.createdModes(in: local, umask: umask, asNobody: asNobody)
      let actual = try Self.createdModes(in: mounted, umask: umask, asNobody: asNobody)
      #expect(actual == expected, "\(name): mount \(actual), local directory \(expected)")
    }
    try fixture.unmount()
  }
}
