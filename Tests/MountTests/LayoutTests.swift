import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The fixed sandbox layout: its directories cannot be removed, renamed or replaced, and
/// nothing new appears at the root; below the fixed directories everything is the user's.
@Suite("Layout", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct LayoutTests {
  static let fixed = [
    "Documents", "Library", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp",
  ]

  @Test("the root holds exactly Documents, Library and tmp; Library its three directories")
  func rootListing() throws {
    let fixture = try MountFixture.unlocked()
    #expect(try directoryNames(fixture.mountpoint) == ["Documents", "Library", "tmp"])
    #expect(try directoryNames(fixture.path("Library")) == ["Application Support", "Caches", "Preferences"])
    for directory in Self.fixed {
      #expect(fileType(try statPath(fixture.path(directory))) == S_IFDIR, "\(directory)")
      #expect(fileType(try statPath(fixture.backingPath(directory))) == S_IFDIR, "\(directory)")
    }
    try fixture.unmount()
  }

  @Test("rmdir of a fixed directory gives EPERM, even when empty", arguments: fixed)
  func rmdirFixed(directory: String) throws {
    let fixture = try MountFixture.unlocked()
    #expect(errnoOf(rmdir(fixture.path(directory))) == EPERM)
    #expect(fileType(try statPath(fixture.path(directory))) == S_IFDIR)
    #expect(fileType(try statPath(fixture.backingPath(directory))) == S_IFDIR)
    try fixture.unmount()
  }

  @Test("rename of a fixed directory gives EPERM, to the root or below another directory", arguments: fixed)
  func renameFixed(directory: String) throws {
    let fixture = try MountFixture.unlocked()
    #expect(errnoOf(rename(fixture.path(directory), fixture.path("Renamed"))) == EPERM)
    #expect(mkdir(fixture.path("Documents/holder"), 0o755) == 0)
    if directory != "Documents" {
      #expect(errnoOf(rename(fixture.path(directory), fixture.path("Documents/holder/moved"))) == EPERM)
    }
    #expect(fileType(try statPath(fixture.path(directory))) == S_IFDIR)
    #expect(try directoryNames(fixture.path("Documents/holder")) == [])
    #expect(try directoryNames(fixture.backing) == ["Documents", "Library", "tmp"])
    try fixture.unmount()
  }

  @Test("a fixed directory cannot be replaced by rename, RENAME_EXCHANGE or RENAME_NOREPLACE", arguments: fixed)
  func replaceFixed(directory: String) throws {
    let fixture = try MountFixture.unlocked()
    // Not below `directory` (the kernel refuses exchanging a directory with its descendant).
    let source = fixture.path(directory == "Documents" ? "tmp/empty" : "Documents/empty")
    #expect(mkdir(source, 0o755) == 0)
    if directory != "Documents" {
      #expect(errnoOf(rename(source, fixture.path(directory))) == EPERM)
      #expect(
        errnoOf(Libc.renameat2(AT_FDCWD, source, AT_FDCWD, fixture.path(directory), LinuxConstants.RENAME_EXCHANGE))
          == EPERM)
    }
    #expect(
      errnoOf(Libc.renameat2(AT_FDCWD, fixture.path(directory), AT_FDCWD, source, LinuxConstants.RENAME_EXCHANGE))
        == EPERM)
    #expect(fileType(try statPath(source)) == S_IFDIR)
    #expect(fileType(try statPath(fixture.path(directory))) == S_IFDIR)
    try fixture.unmount()
  }

  @Test("nothing new at the root: create, mkdir, symlink, mknod, link and rename into it give EPERM")
  func noNewRootEntries() throws {
    let fixture = try MountFixture.unlocked()
    #expect(errnoOf(open(fixture.path("file"), O_WRONLY | O_CREAT, 0o644)) == EPERM)
    #expect(errnoOf(mkdir(fixture.path("dir"), 0o755)) == EPERM)
    #expect(errnoOf(symlink("Documents", fixture.path("link"))) == EPERM)
    #expect(errnoOf(mkfifo(fixture.path("fifo"), 0o644)) == EPERM)
    try writeFile(fixture.path("Documents/f"), [])
    #expect(errnoOf(link(fixture.path("Documents/f"), fixture.path("hard"))) == EPERM)
    #expect(errnoOf(rename(fixture.path("Documents/f"), fixture.path("moved"))) == EPERM)
    #expect(
      errnoOf(
        Libc.renameat2(
          AT_FDCWD, fixture.path("Documents/f"), AT_FDCWD, fixture.path("moved"), LinuxConstants.RENAME_NOREPLACE))
        == EPERM)
    #expect(try directoryNames(fixture.mountpoint) == ["Documents", "Library", "tmp"])
    #expect(try directoryNames(fixture.backing) == ["Documents", "Library", "tmp"])
    #expect(try directoryNames(fixture.path("Documents")) == ["f"])
    try fixture.unmount()
  }

  @Test(
    "a fixed directory's children are the user's: rename, remove, replace",
    arguments: ["Documents", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp"])
  func childrenAreTheUsers(directory: String) throws {
    let fixture = try MountFixture.unlocked()
    #expect(mkdir(fixture.path(directory + "/child"), 0o755) == 0)
    try writeFile(fixture.path(directory + "/child/f"), bytes("f"))
    #expect(rename(fixture.path(directory + "/child"), fixture.path(directory + "/renamed")) == 0)
    #expect(try readFile(fixture.path(directory + "/renamed/f")) == bytes("f"))
    #expect(rename(fixture.path(directory + "/renamed/f"), fixture.path("tmp/moved-file")) == 0)
    #expect(try readFile(fixture.backingPath("tmp/moved-file")) == bytes("f"))
    #expect(unlink(fixture.path("tmp/moved-file")) == 0)
    #expect(rmdir(fixture.path(directory + "/renamed")) == 0)
    #expect(try directoryNames(fixture.path(directory)) == [])
    try fixture.unmount()
  }

  @Test("the root and fixed directories survive rm -rf of the mount's contents")
  func rmRfKeepsLayout() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/a"), [])
    try writeFile(fixture.path("Library/Caches/b"), [])
    #expect(mkdir(fixture.path("tmp/c"), 0o755) == 0)
    let result = try Command.run("/bin/sh", ["-c", "rm -rf " + shellQuote(fixture.mountpoint) + "/*"])
    #expect(result.status != 0, "rm -rf should report the fixed directories it could not remove")
    #expect(try directoryNames(fixture.mountpoint) == ["Documents", "Library", "tmp"])
    #expect(try directoryNames(fixture.path("Library")) == ["Application Support", "Caches", "Preferences"])
    #expect(try directoryNames(fixture.path("Documents")) == [])
    #expect(try directoryNames(fixture.path("Library/Caches")) == [])
    #expect(try directoryNames(fixture.path("tmp")) == [])
    try fixture.unmount()
  }
}
