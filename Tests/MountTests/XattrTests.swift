import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// What the kernel adds to extended attributes: size probes and ERANGE, and attributes
/// through an open descriptor. (The name mapping, flags, reserved names and values are
/// tested below the mount: AppBoxFSTests' XattrTests.)
@Suite("Extended attributes", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct XattrTests {
  /// Apple's 61-byte binary plist of the string `com.apple.backupd`.
  static let backupPlist = appleBackupPlist

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

}
