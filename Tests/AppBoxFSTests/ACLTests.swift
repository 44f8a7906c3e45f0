import FilesystemInterface
import Posix
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// POSIX ACL writes through the protocol: the backing filesystem judges them as it would
/// the caller's own (set-group-ID cleared as on ext4), and each one drops the kernel's
/// cached attributes before its reply. Needs root (the credential switch) and a backing
/// filesystem with ACLs (the temporary directory's).
@Suite("POSIX ACLs through the protocol", .enabled(if: geteuid() == 0))
struct ACLTests {
  static var other: Caller { Caller(uid: 65534, gid: 65534, pid: getpid(), umask: 0o022) }
  static let accessACL = "system.posix_acl_access"

  /// An access ACL of only the owner, group and other entries, each `rwx`: what
  /// `setfacl -m u::rwx,g::rwx,o::rwx` writes (the kernel's `posix_acl_xattr` format,
  /// version 2, little-endian: tag, permissions, id).
  static let minimalACL: [UInt8] = {
    var bytes: [UInt8] = [2, 0, 0, 0]
    for tag: UInt16 in [0x01, 0x04, 0x20] {  // ACL_USER_OBJ, ACL_GROUP_OBJ, ACL_OTHER
      bytes += [UInt8(tag & 0xFF), UInt8(tag >> 8), 7, 0, 0xFF, 0xFF, 0xFF, 0xFF]
    }
    return bytes
  }()

  /// A file of `owner` and `group` with mode `mode`, made on the backing directory.
  func file(_ box: Sandbox, _ path: String, owner: uid_t, group: gid_t, mode: mode_t) throws -> NodeID {
    box.release(try box.create(path))
    try #require(chown(box.backing + "/" + path, owner, group) == 0)
    try Sys.chmod(box.backing + "/" + path, mode)
    return try box.lookup(path)
  }

  func setACL(_ box: Sandbox, _ node: NodeID, as caller: Caller) throws(Errno) {
    try FileName.withBytes(Array(Self.accessACL.utf8)) { (name) throws(Errno) in
      try Self.minimalACL.withUnsafeBytes { value in
        Result { () throws(Errno) in try box.fs.setxattr(caller, node: node, name: name, value: value, flags: 0) }
      }.get()
    }
  }

  func mode(_ box: Sandbox, _ path: String) throws -> mode_t {
    try Sys.lstatPath(box.backing + "/" + path).st_mode & 0o7777
  }

  @Test("an access ACL set by an owner outside the file's group clears set-group-ID; root's and a member's keep it")
  func setGroupID() throws {
    let box = try Sandbox()
    _ = try box.mkdir("Documents/d")
    // The owner is not in group 0: the mode follows the ACL, set-group-ID goes (ext4).
    let outsider = try file(box, "Documents/d/outsider", owner: 65534, group: 0, mode: 0o2755)
    try setACL(box, outsider, as: Self.other)
    #expect(try mode(box, "Documents/d/outsider") == 0o777)
    // Root (CAP_FSETID) keeps it.
    let byRoot = try file(box, "Documents/d/root", owner: 65534, group: 0, mode: 0o2755)
    try setACL(box, byRoot, as: Sandbox.root)
    #expect(try mode(box, "Documents/d/root") == 0o2777)
    // An owner in the file's group keeps it.
    let member = try file(box, "Documents/d/member", owner: 65534, group: 65534, mode: 0o2755)
    try setACL(box, member, as: Self.other)
    #expect(try mode(box, "Documents/d/member") == 0o2777)
    // A directory: the same rule.
    _ = try box.mkdir("Documents/d/dir")
    try #require(chown(box.backing + "/Documents/d/dir", 65534, 0) == 0)
    try Sys.chmod(box.backing + "/Documents/d/dir", 0o2755)
    try setACL(box, try box.lookup("Documents/d/dir"), as: Self.other)
    #expect(try mode(box, "Documents/d/dir") == 0o777)
    // Someone else's file: refused by the backing filesystem too (not the owner).
    let rootsFile = try file(box, "Documents/d/roots", owner: 0, group: 0, mode: 0o2755)
    #expect(throws: Errno.notPermitted) { try setACL(box, rootsFile, as: Self.other) }
    #expect(try mode(box, "Documents/d/roots") == 0o2755)
    try box.expectExactBooks()
  }

  @Test("every ACL write drops the kernel's cached attributes of its node; other attributes do not")
  func attributesInvalidated() throws {
    let box = try Sandbox()
    let node = try file(box, "Documents/f", owner: 0, group: 0, mode: 0o640)
    let directory = try box.mkdir("Documents/d")
    let invalidations = { (node: NodeID) in
      box.notifier.calls.filter { $0 == .invalidateAttributes(node) }.count
    }
    try setACL(box, node, as: Sandbox.root)
    #expect(invalidations(node) == 1)
    #expect(try mode(box, "Documents/f") == 0o777)
    try box.setxattr("Documents/f", "user.note", "x")
    #expect(invalidations(node) == 1)
    for name in ["system.posix_acl_access", "system.posix_acl_default"] {
      try FileName.withBytes(Array(name.utf8)) { (name) throws(Errno) in
        try Self.minimalACL.withUnsafeBytes { value in
          Result { () throws(Errno) in
            try box.fs.setxattr(Sandbox.root, node: directory, name: name, value: value, flags: 0)
          }
        }.get()
        // The minimal access ACL is the mode itself: nothing stays to remove.
        if name.elementsEqual("system.posix_acl_default".utf8) {
          try box.fs.removexattr(Sandbox.root, node: directory, name: name)
        }
      }
    }
    #expect(invalidations(directory) == 3)
  }
}
