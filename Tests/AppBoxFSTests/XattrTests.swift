import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// setxattr/getxattr/listxattr/removexattr and the mount↔backing name mapping.
@Suite("Extended attributes through the protocol")
struct XattrTests {
  /// Apple's 61-byte binary plist of the string `com.apple.backupd`.
  static let backupPlist = appleBackupPlist

  static let xattrCreate: Int32 = 1
  static let xattrReplace: Int32 = 2

  @Test("a user.* attribute round-trips and is stored unchanged in the backing file")
  func userAttribute() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [])
    try box.setxattr("Documents/f", "user.color", "blue")
    #expect(try box.getxattr("Documents/f", "user.color") == bytes("blue"))
    #expect(try box.xattrNames("Documents/f") == ["user.color"])
    #expect(box.backingXattr("Documents/f", "user.color") == bytes("blue"))
    #expect(try box.backingXattrNames("Documents/f") == ["user.color"])
    try box.setxattr("Documents/f", "user.color", "red")
    #expect(try box.getxattr("Documents/f", "user.color") == bytes("red"))
  }

  @Test("the backup-exclusion plist of the tests is Apple's 61 bytes")
  func plistFixture() {
    #expect(Self.backupPlist.count == 61)
  }

  @Test(
    "Apple's names are stored as user.appbox.x.NAME and listed exactly as set",
    arguments: [
      ("com.apple.MobileBackup", [UInt8(1)]),
      ("com.apple.metadata:com_apple_backup_excludeItem", XattrTests.backupPlist),
    ])
  func appleNames(name: String, value: [UInt8]) throws {
    let box = try Sandbox()
    try box.writeFile("Documents/excluded", bytes("x"))
    try box.setxattr("Documents/excluded", name, bytes: value)
    #expect(try box.getxattr("Documents/excluded", name) == value)
    #expect(try box.xattrNames("Documents/excluded") == [name])
    #expect(try box.backingXattrNames("Documents/excluded") == ["user.appbox.x." + name])
    #expect(box.backingXattr("Documents/excluded", "user.appbox.x." + name) == value)
    try box.removexattr("Documents/excluded", name)
    #expect(try box.xattrNames("Documents/excluded") == [])
    #expect(try box.backingXattrNames("Documents/excluded") == [])
  }

  @Test("user.*, Apple and trusted.* names side by side: listxattr shows exactly the set names")
  func mixedNames() throws {
    let box = try Sandbox()
    let path = "Library/Preferences/p"
    try box.writeFile(path, [])
    try box.setxattr(path, "user.a", bytes: [1])
    try box.setxattr(path, "com.apple.MobileBackup", bytes: [1])
    try box.setxattr(path, "trusted.t", bytes: [2])
    try box.setxattr(path, "com.example.custom", bytes: [3])
    #expect(try box.xattrNames(path) == ["user.a", "com.apple.MobileBackup", "trusted.t", "com.example.custom"])
    #expect(try box.listxattr(path).count == 4)
    #expect(
      try box.backingXattrNames(path) == [
        "user.a", "user.appbox.x.com.apple.MobileBackup", "trusted.t", "user.appbox.x.com.example.custom",
      ])
    #expect(try box.getxattr(path, "trusted.t") == [2])
  }

  @Test("an attribute set in the backing tree under user.appbox.x.NAME shows as NAME")
  func backingToMount() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [])
    try box.setBackingXattr("Documents/f", "user.appbox.x.com.apple.MobileBackup", [1])
    #expect(try box.xattrNames("Documents/f") == ["com.apple.MobileBackup"])
    #expect(try box.getxattr("Documents/f", "com.apple.MobileBackup") == [1])
  }

  @Test("binary values with NUL bytes round-trip; an empty value too")
  func binaryValues() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/bin", [])
    let value: [UInt8] = [0, 1, 0, 0xff, 0, 0x80] + pattern(1000, seed: 11) + [0, 0]
    try box.setxattr("Documents/bin", "user.bin", bytes: value)
    #expect(try box.getxattr("Documents/bin", "user.bin") == value)
    #expect(box.backingXattr("Documents/bin", "user.bin") == value)
    try box.setxattr("Documents/bin", "com.apple.binary", bytes: value)
    #expect(try box.getxattr("Documents/bin", "com.apple.binary") == value)
    try box.setxattr("Documents/bin", "user.empty", bytes: [])
    #expect(try box.getxattr("Documents/bin", "user.empty") == [])
    #expect(try box.xattrNames("Documents/bin").contains("user.empty"))
    try box.expectExactBooks()
  }

  @Test("XATTR_CREATE on an existing name gives EEXIST, XATTR_REPLACE on a missing one ENODATA")
  func createReplaceFlags() throws {
    let box = try Sandbox()
    let path = "Documents/f"
    try box.writeFile(path, [])
    try box.setxattr(path, "user.k", bytes: bytes("1"), flags: Self.xattrCreate)
    #expect(throws: Errno.exists) { try box.setxattr(path, "user.k", bytes: bytes("2"), flags: Self.xattrCreate) }
    #expect(try box.getxattr(path, "user.k") == bytes("1"))
    try box.setxattr(path, "user.k", bytes: bytes("3"), flags: Self.xattrReplace)
    #expect(try box.getxattr(path, "user.k") == bytes("3"))
    #expect(throws: Errno.noData) { try box.setxattr(path, "user.none", bytes: bytes("4"), flags: Self.xattrReplace) }
    #expect(throws: Errno.noData) {
      try box.setxattr(path, "com.apple.MobileBackup", bytes: [1], flags: Self.xattrReplace)
    }
    try box.setxattr(path, "com.apple.MobileBackup", bytes: [1], flags: Self.xattrCreate)
    #expect(throws: Errno.exists) {
      try box.setxattr(path, "com.apple.MobileBackup", bytes: [1], flags: Self.xattrCreate)
    }
    #expect(try box.xattrNames(path) == ["user.k", "com.apple.MobileBackup"])
    try box.expectExactBooks()
  }

  @Test("getxattr and removexattr of a missing name give ENODATA")
  func missingAttribute() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [])
    #expect(throws: Errno.noData) { try box.getxattr("Documents/f", "user.missing") }
    #expect(throws: Errno.noData) { try box.getxattr("Documents/f", "com.apple.MobileBackup") }
    #expect(throws: Errno.noData) { try box.removexattr("Documents/f", "user.missing") }
    try box.setxattr("Documents/f", "user.there", bytes: [1])
    try box.removexattr("Documents/f", "user.there")
    #expect(throws: Errno.noData) { try box.removexattr("Documents/f", "user.there") }
    #expect(try box.listxattr("Documents/f") == [])
    try box.expectExactBooks()
  }

  @Test("names under user.appbox. are reserved: set, get and remove give EPERM and nothing is stored")
  func reservedNames() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [])
    for name in [
      "user.appbox.foo", "user.appbox.x.com.apple.MobileBackup", "user.appbox.", "user.appbox.inherited-protection",
    ] {
      #expect(throws: Errno.notPermitted, "\(name)") { try box.setxattr("Documents/f", name, bytes: [1]) }
      #expect(throws: Errno.notPermitted, "\(name)") { try box.getxattr("Documents/f", name) }
      #expect(throws: Errno.notPermitted, "\(name)") { try box.removexattr("Documents/f", name) }
    }
    #expect(try box.listxattr("Documents/f") == [])
    #expect(try box.backingXattrNames("Documents/f") == [])
    // A name that only starts like the reserved prefix is an ordinary user name.
    try box.setxattr("Documents/f", "user.appboxer", bytes: [2])
    #expect(try box.backingXattrNames("Documents/f") == ["user.appboxer"])
    try box.expectExactBooks()
  }

  @Test("attributes on a directory, and on the file through its node while it is open")
  func directoryAndOpenFile() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/d")
    try box.setxattr("Documents/d", "com.apple.metadata:com_apple_backup_excludeItem", bytes: Self.backupPlist)
    #expect(try box.xattrNames("Documents/d") == ["com.apple.metadata:com_apple_backup_excludeItem"])
    #expect(
      try box.backingXattrNames("Documents/d") == ["user.appbox.x.com.apple.metadata:com_apple_backup_excludeItem"])
    let file = try box.create("Documents/d/f")
    try box.setxattr(file.node, bytes("user.viafd"), [9, 0, 9])
    #expect(try box.getxattr(file.node, bytes("user.viafd")) == [9, 0, 9])
    box.release(file)
    try box.expectExactBooks()
  }

  @Test("attributes follow the file through rename and hard links")
  func attributesFollowRenameAndLink() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/a", [])
    try box.setxattr("Documents/a", "com.apple.MobileBackup", bytes: [1])
    try box.rename("Documents/a", to: "Library/Caches/b")
    #expect(try box.getxattr("Library/Caches/b", "com.apple.MobileBackup") == [1])
    try box.link("Library/Caches/b", as: "Library/Caches/c")
    #expect(try box.xattrNames("Library/Caches/c") == ["com.apple.MobileBackup"])
    try box.expectExactBooks()
  }

  @Test("a file replaced by a temporary file renamed over it loses its attributes (as on Apple systems)")
  func replacedFileLosesAttributes() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/doc", bytes("v1"))
    try box.setxattr("Documents/doc", "com.apple.MobileBackup", bytes: [1])
    try box.writeFile("Documents/.doc.tmp", bytes("v2"))
    try box.rename("Documents/.doc.tmp", to: "Documents/doc")
    #expect(try box.listxattr("Documents/doc") == [])
    #expect(try box.contents("Documents/doc") == bytes("v2"))
  }

  @Test("a non-UTF-8 foreign name round-trips byte for byte")
  func nonUTF8Name() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [])
    let node = try box.lookup("Documents/f")
    let name: [UInt8] = bytes("com.example.") + [0xff, 0xfe, 0x41]
    try box.setxattr(node, name, [7])
    #expect(try box.listxattr("Documents/f") == [name])
    #expect(try box.backingXattrNames("Documents/f").count == 1)
    #expect(try box.getxattr(node, name) == [7])
  }

  @Test("every name listxattr shows can be read with getxattr (as cp -a and rsync -X do), whatever the backing holds")
  func listedNamesAreReadable() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [])
    try box.setxattr("Documents/f", "user.mine", bytes: [1])
    try box.setxattr("Documents/f", "com.apple.MobileBackup", bytes: [1])
    try box.protect("Documents/f", "complete")
    // Attributes another tool (or another AppBox version) left in the backing tree.
    try box.setBackingXattr("Documents/f", "user.appbox.internal", [2])
    try box.setBackingXattr("Documents/f", AppBoxAttribute.inheritedProtectionName, bytes("none"))
    let node = try box.lookup("Documents/f")
    let listed = try box.listxattr("Documents/f")
    #expect(
      Set(listed.map { String(decoding: $0, as: UTF8.self) }) == [
        "user.mine", "com.apple.MobileBackup", AppBoxAttribute.protection.name,
      ])
    for name in listed {
      #expect(throws: Never.self, "\(String(decoding: name, as: UTF8.self))") { _ = try box.getxattr(node, name) }
    }
  }

  @Test("xattrs on a symlink act on the link itself, never on its target (also outside the sandbox)")
  func symlinkXattrsStayOnTheLink() throws {
    let box = try Sandbox()
    let victim = box.temporary.base + "/victim"
    try TestFiles.write(victim, bytes("v"))
    try Xattr.set(path: victim, name: "user.secret", value: [1])
    try box.symlink(victim, at: "Documents/link")
    // Foreign names become user.* names, which Linux refuses on symlinks.
    #expect(throws: Errno.notPermitted) { try box.setxattr("Documents/link", "com.apple.MobileBackup", bytes: [1]) }
    try box.setxattr("Documents/link", "trusted.onlink", bytes: [3])
    #expect(throws: Errno.noData) { try box.getxattr("Documents/link", "user.secret") }
    #expect(try box.listxattr("Documents/link").map { String(decoding: $0, as: UTF8.self) } == ["trusted.onlink"])
    #expect(box.backingXattr("Documents/link", "trusted.onlink") == [3])
    let onVictim = try Sys.open(victim, O_RDONLY | O_CLOEXEC)
    defer { Sys.close(onVictim) }
    #expect(try Xattr.names(onVictim).map { String(decoding: $0, as: UTF8.self) } == ["user.secret"])
    try box.removexattr("Documents/link", "trusted.onlink")
    #expect(try Xattr.value(onVictim, name: "user.secret") == [1])
  }
}
