import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// The fixed sandbox layout: its directories cannot be removed, renamed or replaced, and
/// nothing new appears at the root; below the fixed directories everything is the user's.
@Suite("Layout through the protocol")
struct LayoutTests {
  static let fixed = [
    "Documents", "Library", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp",
  ]

  @Test("the root holds exactly Documents, Library and tmp; Library its three directories")
  func rootListing() throws {
    let box = try Sandbox()
    #expect(try box.list("") == ["Documents", "Library", "tmp"])
    #expect(try box.list("Library") == ["Application Support", "Caches", "Preferences"])
    for directory in Self.fixed {
      #expect(try box.getattr(directory).st_mode & S_IFMT == S_IFDIR, "\(directory)")
      #expect(try box.backingStat(directory).st_mode & S_IFMT == S_IFDIR, "\(directory)")
    }
  }

  @Test("a layout made before is used as it is; a fixed name that is not a directory refuses the mount")
  func existingLayout() throws {
    let box = try Sandbox(prepare: { backing in
      try Sys.mkdir(backing + "/Documents", 0o700)
      try TestFiles.write(backing + "/Documents/kept", [1])
    })
    #expect(try box.list("Documents") == ["kept"])
    #expect(try box.backingStat("Documents").st_mode & 0o777 == 0o700, "left as it was")
    #expect(throws: SandboxSetupError.system(.notDirectory)) {
      try Sandbox(prepare: { backing in
        try TestFiles.write(backing + "/tmp", [1])
      })
    }
  }

  @Test("rmdir of a fixed directory gives EPERM, even when empty", arguments: fixed)
  func rmdirFixed(directory: String) throws {
    let box = try Sandbox()
    #expect(throws: Errno.notPermitted) { try box.rmdir(directory) }
    #expect(try box.getattr(directory).st_mode & S_IFMT == S_IFDIR)
    #expect(try box.backingStat(directory).st_mode & S_IFMT == S_IFDIR)
  }

  @Test("rename of a fixed directory gives EPERM, to the root or below another directory", arguments: fixed)
  func renameFixed(directory: String) throws {
    let box = try Sandbox()
    #expect(throws: Errno.notPermitted) { try box.rename(directory, to: "Renamed") }
    try box.mkdir("Documents/holder")
    if directory != "Documents" {
      #expect(throws: Errno.notPermitted) { try box.rename(directory, to: "Documents/holder/moved") }
    }
    #expect(try box.getattr(directory).st_mode & S_IFMT == S_IFDIR)
    #expect(try box.list("Documents/holder") == [])
    #expect(box.backingList("") == ["Documents", "Library", "tmp"])
  }

  @Test("a fixed directory cannot be replaced by rename, RENAME_EXCHANGE or RENAME_NOREPLACE", arguments: fixed)
  func replaceFixed(directory: String) throws {
    let box = try Sandbox()
    let source = directory == "Documents" ? "tmp/empty" : "Documents/empty"
    try box.mkdir(source)
    if directory != "Documents" {
      #expect(throws: Errno.notPermitted) { try box.rename(source, to: directory) }
      #expect(throws: Errno.notPermitted) { try box.rename(source, to: directory, flags: Linux.renameExchange) }
    }
    #expect(throws: Errno.notPermitted) { try box.rename(directory, to: source, flags: Linux.renameExchange) }
    #expect(throws: Errno.notPermitted) { try box.rename(directory, to: source, flags: Linux.renameNoReplace) }
    #expect(try box.getattr(source).st_mode & S_IFMT == S_IFDIR)
    #expect(try box.getattr(directory).st_mode & S_IFMT == S_IFDIR)
  }

  @Test("nothing new at the root: create, mkdir, symlink, mknod, link and rename into it give EPERM")
  func noNewRootEntries() throws {
    let box = try Sandbox()
    #expect(throws: Errno.notPermitted) { try box.create("file") }
    #expect(throws: Errno.notPermitted) { try box.create("file", flags: O_RDWR) }
    #expect(throws: Errno.notPermitted) { try box.mkdir("dir") }
    #expect(throws: Errno.notPermitted) { try box.symlink("Documents", at: "link") }
    #expect(throws: Errno.notPermitted) { try box.mknod("fifo", mode: S_IFIFO | 0o644) }
    try box.makeFile("Documents/f", bytes: 0)
    #expect(throws: Errno.notPermitted) { try box.link("Documents/f", as: "hard") }
    #expect(throws: Errno.notPermitted) { try box.rename("Documents/f", to: "moved") }
    #expect(throws: Errno.notPermitted) { try box.rename("Documents/f", to: "moved", flags: Linux.renameNoReplace) }
    #expect(try box.list("") == ["Documents", "Library", "tmp"])
    #expect(box.backingList("") == ["Documents", "Library", "tmp"])
    #expect(try box.list("Documents") == ["f"])
    try box.expectExactBooks()
  }

  @Test("Library's own level takes new entries; its three directories stay fixed")
  func libraryLevel() throws {
    let box = try Sandbox()
    try box.mkdir("Library/Other")
    try box.makeFile("Library/Other/f", bytes: 100)
    try box.rename("Library/Other", to: "Library/Renamed")
    #expect(try box.list("Library") == ["Application Support", "Caches", "Preferences", "Renamed"])
    #expect(throws: Errno.notPermitted) { try box.rename("Library/Renamed", to: "Library/Caches") }
    try box.unlink("Library/Renamed/f")
    try box.rmdir("Library/Renamed")
    try box.expectExactBooks()
  }

  @Test(
    "a fixed directory's children are the user's: rename, remove, replace",
    arguments: ["Documents", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp"])
  func childrenAreTheUsers(directory: String) throws {
    let box = try Sandbox()
    try box.mkdir(directory + "/child")
    try box.writeFile(directory + "/child/f", bytes("f"))
    try box.rename(directory + "/child", to: directory + "/renamed")
    #expect(try box.contents(directory + "/renamed/f") == bytes("f"))
    try box.rename(directory + "/renamed/f", to: "tmp/moved-file")
    #expect(try box.backingContents("tmp/moved-file") == bytes("f"))
    try box.unlink("tmp/moved-file")
    try box.rmdir(directory + "/renamed")
    #expect(try box.list(directory) == [])
    try box.expectExactBooks()
  }

  @Test("the root and fixed directories survive removing everything below the root (rm -rf)")
  func removeEverythingKeepsLayout() throws {
    let box = try Sandbox()
    try box.makeFile("Documents/a", bytes: 10)
    try box.makeFile("Library/Caches/b", bytes: 10)
    try box.mkdir("tmp/c")
    try box.makeFile("tmp/c/d", bytes: 10)
    var refused: [String] = []
    func remove(_ path: String) throws {
      let isDirectory = try box.getattr(path).st_mode & S_IFMT == S_IFDIR
      if isDirectory {
        for name in try box.list(path) { try remove(path + "/" + name) }
      }
      do throws(Errno) {
        if isDirectory { try box.rmdir(path) } else { try box.unlink(path) }
      } catch {
        #expect(error == .notPermitted, "\(path)")
        refused.append(path)
      }
    }
    for name in try box.list("") { try remove(name) }
    #expect(Set(refused) == Set(Self.fixed), "rm -rf reports the fixed directories it could not remove")
    #expect(try box.list("") == ["Documents", "Library", "tmp"])
    #expect(try box.list("Library") == ["Application Support", "Caches", "Preferences"])
    for directory in Self.fixed where directory != "Library" { #expect(try box.list(directory) == []) }
    try box.expectExactBooks()
  }
}
