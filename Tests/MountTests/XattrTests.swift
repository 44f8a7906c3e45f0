import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// setxattr/getxattr/listxattr/removexattr and the mount↔backing name mapping.
@Suite("Extended attributes", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct XattrTests {
  /// Apple's 61-byte binary plist of the string `com.apple.backupd`.
  static let backupPlist: [UInt8] = {
    var plist = bytes("bplist00") + [0x5F, 0x10, 0x11] + bytes("com.apple.backupd")
    plist += [0x08]  // offset table: the one object at offset 8
    plist += [0, 0, 0, 0, 0, 0, 1, 1]  // trailer: offset and reference sizes
    plist += [0, 0, 0, 0, 0, 0, 0, 1] + [0, 0, 0, 0, 0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 0x1c]
    return plist
  }()

  @Test("a user.* attribute round-trips and is stored unchanged in the backing file")
  func userAttribute() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/f")
    try writeFile(path, [])
    #expect(setXattr(path, "user.color", bytes("blue")) == 0)
    #expect(try getXattr(path, "user.color") == bytes("blue"))
    #expect(try listXattrNames(path) == ["user.color"])
    #expect(try getXattr(fixture.backingPath("Documents/f"), "user.color") == bytes("blue"))
    #expect(try backingXattrNames(fixture.backingPath("Documents/f")) == ["user.color"])
    #expect(setXattr(path, "user.color", bytes("red")) == 0)
    #expect(try getXattr(path, "user.color") == bytes("red"))
    try fixture.unmount()
  }

  @Test(
    "Apple's names are stored as user.appbox.x.NAME and listed on the mount exactly as set",
    arguments: [
      ("com.apple.MobileBackup", [UInt8(1)]),
      ("com.apple.metadata:com_apple_backup_excludeItem", XattrTests.backupPlist),
    ])
  func appleNames(name: String, value: [UInt8]) throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/excluded")
    try writeFile(path, bytes("x"))
    #expect(setXattr(path, name, value) == 0)
    #expect(try getXattr(path, name) == value)
    #expect(try listXattrNames(path) == [name])
    let backing = fixture.backingPath("Documents/excluded")
    #expect(try backingXattrNames(backing) == ["user.appbox.x." + name])
    #expect(try getXattr(backing, "user.appbox.x." + name) == value)
    #expect(errnoOf(Libc.removexattr(path, name)) == 0)
    #expect(try listXattrNames(path) == [])
    #expect(try backingXattrNames(backing) == [])
    try fixture.unmount()
  }

  @Test("the backup-exclusion plist is 61 bytes")
  func plistFixture() {
    #expect(Self.backupPlist.count == 61)
  }

  @Test("user.*, Apple and trusted.* names side by side: listxattr shows exactly the set names")
  func mixedNames() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Library/Preferences/p")
    try writeFile(path, [])
    #expect(setXattr(path, "user.a", [1]) == 0)
    #expect(setXattr(path, "com.apple.MobileBackup", [1]) == 0)
    #expect(setXattr(path, "trusted.t", [2]) == 0)
    #expect(setXattr(path, "com.example.custom", [3]) == 0)
    #expect(Set(try listXattrNames(path)) == ["user.a", "com.apple.MobileBackup", "trusted.t", "com.example.custom"])
    #expect(try listXattr(path).count == 4)
    #expect(
      Set(try backingXattrNames(fixture.backingPath("Library/Preferences/p")))
        == ["user.a", "user.appbox.x.com.apple.MobileBackup", "trusted.t", "user.appbox.x.com.example.custom"])
    #expect(try getXattr(path, "trusted.t") == [2])
    try fixture.unmount()
  }

  @Test("an attribute set in the backing tree under user.appbox.x.NAME shows on the mount as NAME")
  func backingToMount() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/f"), [])
    #expect(setXattr(fixture.backingPath("Documents/f"), "user.appbox.x.com.apple.MobileBackup", [1]) == 0)
    #expect(try listXattrNames(fixture.path("Documents/f")) == ["com.apple.MobileBackup"])
    #expect(try getXattr(fixture.path("Documents/f"), "com.apple.MobileBackup") == [1])
    try fixture.unmount()
  }

  @Test("binary values with NUL bytes round-trip; an empty value too")
  func binaryValues() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/bin")
    try writeFile(path, [])
    let value: [UInt8] = [0, 1, 0, 0xff, 0, 0x80] + pattern(1000, seed: 11) + [0, 0]
    #expect(setXattr(path, "user.bin", value) == 0)
    #expect(try getXattr(path, "user.bin") == value)
    #expect(try getXattr(fixture.backingPath("Documents/bin"), "user.bin") == value)
    #expect(setXattr(path, "com.apple.binary", value) == 0)
    #expect(try getXattr(path, "com.apple.binary") == value)
    #expect(setXattr(path, "user.empty", []) == 0)
    #expect(try getXattr(path, "user.empty") == [])
    #expect(try listXattrNames(path).contains("user.empty"))
    try fixture.unmount()
  }

  @Test("XATTR_CREATE on an existing name gives EEXIST, XATTR_REPLACE on a missing one ENODATA")
  func createReplaceFlags() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/f")
    try writeFile(path, [])
    #expect(setXattr(path, "user.k", bytes("1"), flags: LinuxConstants.XATTR_CREATE) == 0)
    #expect(setXattr(path, "user.k", bytes("2"), flags: LinuxConstants.XATTR_CREATE) == EEXIST)
    #expect(try getXattr(path, "user.k") == bytes("1"))
    #expect(setXattr(path, "user.k", bytes("3"), flags: LinuxConstants.XATTR_REPLACE) == 0)
    #expect(try getXattr(path, "user.k") == bytes("3"))
    #expect(setXattr(path, "user.none", bytes("4"), flags: LinuxConstants.XATTR_REPLACE) == ENODATA)
    #expect(setXattr(path, "com.apple.MobileBackup", [1], flags: LinuxConstants.XATTR_REPLACE) == ENODATA)
    #expect(setXattr(path, "com.apple.MobileBackup", [1], flags: LinuxConstants.XATTR_CREATE) == 0)
    #expect(setXattr(path, "com.apple.MobileBackup", [1], flags: LinuxConstants.XATTR_CREATE) == EEXIST)
    #expect(Set(try listXattrNames(path)) == ["user.k", "com.apple.MobileBackup"])
    try fixture.unmount()
  }

  @Test("getxattr and removexattr of a missing name give ENODATA")
  func missingAttribute() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/f")
    try writeFile(path, [])
    var buffer = [UInt8](repeating: 0, count: 16)
    #expect(errnoOf(Libc.getxattr(path, "user.missing", &buffer, 16)) == ENODATA)
    #expect(errnoOf(Libc.getxattr(path, "com.apple.MobileBackup", &buffer, 16)) == ENODATA)
    #expect(errnoOf(Libc.removexattr(path, "user.missing")) == ENODATA)
    #expect(setXattr(path, "user.there", [1]) == 0)
    #expect(errnoOf(Libc.removexattr(path, "user.there")) == 0)
    #expect(errnoOf(Libc.removexattr(path, "user.there")) == ENODATA)
    #expect(try listXattr(path) == [])
    try fixture.unmount()
  }

  @Test("a too-small buffer gives ERANGE; size 0 asks for the needed size")
  func erange() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/f")
    try writeFile(path, [])
    #expect(setXattr(path, "user.long", [UInt8](repeating: 7, count: 100)) == 0)
    #expect(setXattr(path, "com.apple.MobileBackup", [1]) == 0)
    #expect(Libc.getxattr(path, "user.long", nil, 0) == 100)
    var small = [UInt8](repeating: 0, count: 99)
    #expect(errnoOf(Libc.getxattr(path, "user.long", &small, 99)) == ERANGE)
    let listSize = Libc.listxattr(path, nil, 0)
    #expect(listSize == "user.long".utf8.count + 1 + "com.apple.MobileBackup".utf8.count + 1)
    var list = [CChar](repeating: 0, count: max(listSize - 1, 1))
    #expect(errnoOf(Libc.listxattr(path, &list, list.count)) == ERANGE)
    try fixture.unmount()
  }

  @Test("names under user.appbox. are reserved: set, get and remove give EPERM and nothing is stored")
  func reservedNames() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/f")
    try writeFile(path, [])
    for name in ["user.appbox.foo", "user.appbox.x.com.apple.MobileBackup", "user.appbox."] {
      #expect(setXattr(path, name, [1]) == EPERM, "\(name)")
      var buffer = [UInt8](repeating: 0, count: 8)
      #expect(errnoOf(Libc.getxattr(path, name, &buffer, 8)) == EPERM, "\(name)")
      #expect(errnoOf(Libc.removexattr(path, name)) == EPERM, "\(name)")
    }
    #expect(try listXattr(path) == [])
    #expect(try backingXattrNames(fixture.backingPath("Documents/f")) == [])
    // A name that only starts like the reserved prefix is an ordinary user name.
    #expect(setXattr(path, "user.appboxer", [2]) == 0)
    #expect(try backingXattrNames(fixture.backingPath("Documents/f")) == ["user.appboxer"])
    try fixture.unmount()
  }

  @Test("attributes on a directory and through an open descriptor (fsetxattr/fgetxattr)")
  func directoryAndFD() throws {
    let fixture = try MountFixture.unlocked()
    let dir = fixture.path("Documents/d")
    #expect(mkdir(dir, 0o755) == 0)
    #expect(setXattr(dir, "com.apple.metadata:com_apple_backup_excludeItem", Self.backupPlist) == 0)
    #expect(try listXattrNames(dir) == ["com.apple.metadata:com_apple_backup_excludeItem"])
    #expect(
      try backingXattrNames(fixture.backingPath("Documents/d")) == [
        "user.appbox.x.com.apple.metadata:com_apple_backup_excludeItem"
      ])
    try writeFile(dir + "/f", [])
    let fd = try openFile(dir + "/f", O_RDONLY)
    #expect(errnoOf(Libc.fsetxattr(fd, "user.viafd", [UInt8]([9, 0, 9]), 3, 0)) == 0)
    var buffer = [UInt8](repeating: 0, count: 8)
    #expect(Libc.fgetxattr(fd, "user.viafd", &buffer, 8) == 3)
    #expect(Array(buffer[..<3]) == [9, 0, 9])
    close(fd)
    try fixture.unmount()
  }

  @Test("attributes follow the file through rename and hard links")
  func attributesFollowRenameAndLink() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/a"), [])
    #expect(setXattr(fixture.path("Documents/a"), "com.apple.MobileBackup", [1]) == 0)
    #expect(rename(fixture.path("Documents/a"), fixture.path("Library/Caches/b")) == 0)
    #expect(try getXattr(fixture.path("Library/Caches/b"), "com.apple.MobileBackup") == [1])
    #expect(link(fixture.path("Library/Caches/b"), fixture.path("Library/Caches/c")) == 0)
    #expect(try listXattrNames(fixture.path("Library/Caches/c")) == ["com.apple.MobileBackup"])
    try fixture.unmount()
  }

  @Test("a non-UTF-8 foreign name round-trips byte for byte")
  func nonUTF8Name() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/f")
    try writeFile(path, [])
    let name: [UInt8] = Array("com.example.".utf8) + [0xff, 0xfe, 0x41]
    let set = withRawPath(name) { n in errnoOf(Libc.setxattr(path, n, [UInt8]([7]), 1, 0)) }
    #expect(set == 0)
    #expect(try listXattr(path) == [name])
    #expect(try listXattr(fixture.backingPath("Documents/f")).contains(Array("user.appbox.x.".utf8) + name))
    var value: UInt8 = 0
    #expect(withRawPath(name) { n in Libc.getxattr(path, n, &value, 1) } == 1)
    #expect(value == 7)
    try fixture.unmount()
  }

  @Test(
    "every name listxattr shows can be read with getxattr (as cp -a and rsync -X do), whatever the backing file holds")
  func listedNamesAreReadable() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/f")
    try writeFile(path, [])
    let backing = fixture.backingPath("Documents/f")
    #expect(setXattr(path, "user.mine", [1]) == 0)
    #expect(setXattr(path, "com.apple.MobileBackup", [1]) == 0)
    // Attributes another tool (or another AppBox version) left in the backing tree.
    #expect(setXattr(backing, "user.appbox.internal", [2]) == 0)
    var unreadable: [String: Int32] = [:]
    for name in try listXattr(path) {
      var buffer = [UInt8](repeating: 0, count: 64)
      let result = withRawPath(name) { n in Libc.getxattr(path, n, &buffer, 64) }
      if result < 0 { unreadable[String(decoding: name, as: UTF8.self)] = errno }
    }
    #expect(unreadable.isEmpty, "listed but unreadable (name: errno): \(unreadable)")
    try fixture.unmount()
  }

  @Test("xattrs on a symlink act on the link itself, never on its target (also outside the sandbox)")
  func symlinkXattrsStayOnTheLink() throws {
    let fixture = try MountFixture.unlocked()
    let victim = fixture.root + "/victim"
    try writeFile(victim, bytes("v"))
    #expect(setXattr(victim, "user.secret", [1]) == 0)
    let link = fixture.path("Documents/link")
    #expect(symlink(victim, link) == 0)
    let lsetxattr = unsafeBitCast(
      dlsym(nil, "lsetxattr"), to: (@convention(c) (Libc.Path, Libc.Path, UnsafeRawPointer?, Int, Int32) -> Int32).self)
    let lgetxattr = unsafeBitCast(
      dlsym(nil, "lgetxattr"), to: (@convention(c) (Libc.Path, Libc.Path, UnsafeMutableRawPointer?, Int) -> Int).self)
    // Foreign names become user.* names, which Linux refuses on symlinks.
    #expect(errnoOf(lsetxattr(link, "com.apple.MobileBackup", [UInt8]([1]), 1, 0)) == EPERM)
    #expect(lsetxattr(link, "trusted.onlink", [UInt8]([3]), 1, 0) == 0)
    var buffer = [UInt8](repeating: 0, count: 8)
    #expect(errnoOf(lgetxattr(link, "user.secret", &buffer, 8)) == ENODATA)
    #expect(try listXattrNames(victim) == ["user.secret"])
    var onLink: UInt8 = 0
    #expect(lgetxattr(fixture.backingPath("Documents/link"), "trusted.onlink", &onLink, 1) == 1)
    #expect(onLink == 3)
    #expect(errnoOf(Libc.getxattr(victim, "trusted.onlink", &buffer, 8)) == ENODATA)
    try fixture.unmount()
  }
}
