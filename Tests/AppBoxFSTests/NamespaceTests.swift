import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// The request path of every domain, through the protocol, without a kernel.
@Suite("Namespace through the protocol")
struct NamespaceTests {
  static let domains = ["Documents", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp"]

  @Test("create, write, read, list, rename and unlink in each domain", arguments: domains)
  func roundTrip(_ directory: String) throws {
    let box = try Sandbox()
    let file = try box.create("\(directory)/a")
    #expect(try box.write(file, Array("hello".utf8)) == 5)
    #expect(try box.read(file, count: 64) == Array("hello".utf8))
    box.release(file)
    #expect(try box.list(directory) == ["a"])

    try box.rename("\(directory)/a", to: "\(directory)/b")
    #expect(throws: Errno.noEntry) { try box.lookup("\(directory)/a") }
    #expect(try box.lookup("\(directory)/b") == file.node)  // the same inode
    let reopened = try box.open("\(directory)/b")
    #expect(try box.read(reopened, count: 64) == Array("hello".utf8))
    box.release(reopened)
    try box.expectExactBooks()

    try box.unlink("\(directory)/b")
    #expect(throws: Errno.noEntry) { try box.lookup("\(directory)/b") }
    #expect(!box.backingHas("\(directory)/b"))
    try box.expectExactBooks()
  }

  @Test("a name with bytes that are not UTF-8 stays those bytes")
  func nonUTF8Name() throws {
    let box = try Sandbox()
    let name: [UInt8] = [0x66, 0xFF, 0xFE, 0x80]
    let documents = try box.lookup("Documents")
    let entry = try FileName.withBytes(name) { (name) throws(Errno) in
      try box.fs.mkdir(Sandbox.root, parent: documents, name: name, mode: 0o755)
    }
    let handle = try box.fs.opendir(Sandbox.root, node: documents, flags: O_RDONLY).handle
    var filler = ListFiller(plus: true)
    try box.fs.readdir(Sandbox.root, node: documents, handle: handle, offset: 0, filler: &filler)
    box.fs.releasedir(Sandbox.root, node: documents, handle: handle)
    #expect(filler.names.contains(name))
    #expect(filler.entries.contains { $0.node == entry.node })
  }

  @Test("the fixed directories cannot be removed or renamed", arguments: ["Documents", "Library", "tmp"])
  func fixedDirectories(_ name: String) throws {
    let box = try Sandbox()
    let root = NodeID.root
    FileName.withBytes(Array(name.utf8)) { (name) in
      #expect(throws: Errno.notPermitted) { try box.fs.rmdir(Sandbox.root, parent: root, name: name) }
      FileName.withBytes(Array("x".utf8)) { (other) in
        #expect(throws: Errno.notPermitted) {
          try box.fs.rename(Sandbox.root, parent: root, name: name, newParent: root, newName: other, flags: 0)
        }
      }
    }
  }

  @Test("files already in the backing tree: a create without O_EXCL opens them without truncating; with it, EEXIST")
  func preexistingBackingFiles() throws {
    let box = try Sandbox(prepare: { backing in
      try Sys.mkdir(backing + "/Documents", 0o755)
      try TestFiles.write(backing + "/Documents/old", bytes("old data"))
      try TestFiles.write(backing + "/Documents/old2", bytes("old2"))
    })
    // The kernel has not looked these names up yet, so it sends CREATE.
    let file = try box.create("Documents/old", mode: 0o600, flags: O_WRONLY)
    #expect(try box.write(file, bytes("NEW")) == 3)
    box.release(file)
    #expect(try box.contents("Documents/old") == bytes("NEW data"))
    #expect(try box.getattr("Documents/old").st_mode & 0o777 == 0o644, "the mode is the existing file's")
    #expect(throws: Errno.exists) { try box.create("Documents/old2", flags: O_WRONLY | O_EXCL) }
    #expect(try box.contents("Documents/old2") == bytes("old2"))
    try box.expectExactBooks()
  }

  @Test("a new file has the mode asked for, less the caller's umask, and belongs to the caller")
  func newFileMode() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/excl", mode: 0o666)
    box.release(file)
    #expect(try box.backingStat("Documents/excl").st_mode & 0o777 == 0o644)
    #expect(try box.backingStat("Documents/excl").st_size == 0)
  }

  @Test("O_TRUNC empties an existing file; what is written then is all it holds")
  func truncateOnOpen() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/t", bytes("0123456789"))
    let file = try box.open("Documents/t", flags: O_RDWR | O_TRUNC)
    #expect(try box.fs.getattr(Sandbox.root, node: file.node, handle: file.handle).st_size == 0)
    #expect(try box.write(file, bytes("ab")) == 2)
    box.release(file)
    #expect(try box.contents("Documents/t") == bytes("ab"))
    #expect(try box.backingContents("Documents/t") == bytes("ab"))
  }

  @Test("an unlinked file stays readable and writable through its open handle; its name is gone at once")
  func openUnlinked() throws {
    let box = try Sandbox()
    let file = try box.create("tmp/scratch", mode: 0o600)
    #expect(try box.write(file, bytes("before")) == 6)
    try box.unlink("tmp/scratch")
    #expect(throws: Errno.noEntry) { try box.lookup("tmp/scratch") }
    #expect(try box.write(file, bytes("+after"), at: 6) == 6)
    #expect(try box.read(file, count: 100) == bytes("before+after"))
    #expect(try box.fs.getattr(Sandbox.root, node: file.node, handle: file.handle).st_nlink == 0)
    box.release(file)
    #expect(box.backingList("tmp") == [])
    try box.expectExactBooks()
  }

  @Test(
    "new files, directories, symlinks and FIFOs belong to the caller, on the backing tree", .enabled(if: geteuid() == 0)
  )
  func ownership() throws {
    let box = try Sandbox()
    try box.mkdir("tmp/shared", mode: 0o777)
    try Sys.chmod(box.backing + "/tmp/shared", 0o1777)
    box.release(try box.create("tmp/shared/file", as: Sandbox.nobody))
    try box.mkdir("tmp/shared/dir", as: Sandbox.nobody)
    try box.symlink("file", at: "tmp/shared/link", as: Sandbox.nobody)
    try box.mknod("tmp/shared/fifo", mode: S_IFIFO | 0o644, as: Sandbox.nobody)
    for name in ["file", "dir", "link", "fifo"] {
      let st = try box.backingStat("tmp/shared/" + name)
      #expect(st.st_uid == 65534 && st.st_gid == 65534, "\(name)")
    }
    try box.expectExactBooks()
  }

  @Test(
    "a symlink to /etc/passwd stays a symlink: readlink, the backing holds only the link; chown and unlink act on it")
  func absoluteSymlinkDoesNotEscape() throws {
    let box = try Sandbox()
    let link = try box.symlink("/etc/passwd", at: "Documents/passwd")
    #expect(try box.fs.getattr(Sandbox.root, node: link, handle: nil).st_mode & S_IFMT == S_IFLNK)
    #expect(try box.readlink("Documents/passwd") == "/etc/passwd")
    #expect(try box.backingStat("Documents/passwd").st_mode & S_IFMT == S_IFLNK)
    #expect(box.backingList("Documents") == ["passwd"])
    let before = try Sys.statPath("/etc/passwd")
    var owner = stat()
    owner.st_uid = 4242
    owner.st_gid = 4242
    _ = try box.fs.setattr(Sandbox.root, node: link, attributes: owner, fields: [.uid, .gid], handle: nil)
    #expect(try box.backingStat("Documents/passwd").st_uid == 4242, "the link itself")
    try box.unlink("Documents/passwd")
    let after = try Sys.statPath("/etc/passwd")
    #expect(after.st_uid == before.st_uid && after.st_ino == before.st_ino)
    #expect(box.backingList("Documents") == [])
  }

  @Test("hard links: nlink counts, one inode, shared content, EEXIST over a name, unlinking one keeps the other")
  func hardLinks() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/sub")
    try box.writeFile("Documents/a", bytes("shared"))
    try box.link("Documents/a", as: "Documents/sub/b")
    #expect(try box.getattr("Documents/a").st_nlink == 2)
    #expect(try box.getattr("Documents/sub/b").st_ino == (try box.getattr("Documents/a").st_ino))
    #expect(try box.backingStat("Documents/sub/b").st_ino == (try box.backingStat("Documents/a").st_ino))
    let file = try box.open("Documents/sub/b", flags: O_WRONLY | O_APPEND)
    #expect(try box.write(file, bytes("+more"), at: 6) == 5)
    box.release(file)
    #expect(try box.contents("Documents/a") == bytes("shared+more"))
    #expect(throws: Errno.exists) { try box.link("Documents/a", as: "Documents/sub/b") }
    try box.unlink("Documents/a")
    #expect(try box.getattr("Documents/sub/b").st_nlink == 1)
    #expect(try box.contents("Documents/sub/b") == bytes("shared+more"))
    try box.expectExactBooks()
  }

  @Test("mknod of a FIFO, a socket and a character device (as root): their type, mode and st_rdev, on the backing too")
  func specialNodes() throws {
    let box = try Sandbox()
    try box.mknod("Documents/fifo", mode: S_IFIFO | 0o640)
    #expect(try box.getattr("Documents/fifo").st_mode & S_IFMT == S_IFIFO)
    #expect(try box.getattr("Documents/fifo").st_mode & 0o777 == 0o640)
    try box.mknod("Documents/socket", mode: S_IFSOCK | 0o600)
    #expect(try box.backingStat("Documents/socket").st_mode & S_IFMT == S_IFSOCK)
    if geteuid() == 0 {
      let device = dev_t(1 << 8 | 3)  // 1:3, /dev/null's
      try box.mknod("Documents/null", mode: S_IFCHR | 0o666, device: device)
      #expect(try box.getattr("Documents/null").st_mode & S_IFMT == S_IFCHR)
      #expect(try box.getattr("Documents/null").st_rdev == device)
      #expect(try box.backingStat("Documents/null").st_rdev == device)
    }
    try box.expectExactBooks()
  }

  @Test("a name that is not UTF-8 is created, listed and removed as exactly its bytes, on the backing too")
  func nonUTF8File() throws {
    let box = try Sandbox()
    let name: [UInt8] = [0x62, 0x61, 0x64, 0xff, 0xfe, 0x2e, 0x74, 0x78, 0x74]  // "bad\xff\xfe.txt"
    let documents = try box.lookup("Documents")
    let (entry, opened) = try FileName.withBytes(name) { (name) throws(Errno) in
      try box.fs.create(Sandbox.root, parent: documents, name: name, mode: 0o644, flags: O_RDWR | O_EXCL)
    }
    #expect(try box.write((entry.node, opened.handle), bytes("raw")) == 3)
    box.release((entry.node, opened.handle))
    let listed = TestFiles.rawEntries(of: box.backing + "/Documents")
    #expect(listed == [name])
    #expect(throws: Errno.noEntry, "the replacement-character spelling is another name") {
      try box.lookup("Documents/bad\u{FFFD}\u{FFFD}.txt")
    }
    let found = try FileName.withBytes(name) { (name) throws(Errno) in
      try box.fs.lookup(Sandbox.root, parent: documents, name: name)
    }
    #expect(found.node == entry.node && found.attributes.st_size == 3)
    try FileName.withBytes(name) { (name) throws(Errno) in
      try box.fs.unlink(Sandbox.root, parent: documents, name: name)
    }
    #expect(box.backingList("Documents") == [])
  }

  @Test("names of 255 bytes work; 256 bytes give ENAMETOOLONG for lookup, create and mkdir")
  func nameLength() throws {
    let box = try Sandbox()
    let longest = String(repeating: "n", count: 255)
    try box.writeFile("Documents/" + longest, bytes("x"))
    #expect(try box.list("Documents") == [longest])
    let tooLong = String(repeating: "n", count: 256)
    #expect(throws: Errno.nameTooLong) { try box.lookup("Documents/" + tooLong) }
    #expect(throws: Errno.nameTooLong) { try box.create("Documents/" + tooLong, flags: O_WRONLY) }
    #expect(throws: Errno.nameTooLong) { try box.mkdir("Documents/" + tooLong) }
    try box.expectExactBooks()
  }

  @Test("names with spaces, newlines and Unicode in NFC and NFD are distinct entries")
  func unusualNames() throws {
    let box = try Sandbox()
    let names = ["with space", "new\nline", "caf\u{E9}", "cafe\u{301}", "-dash", ".hidden", "\u{1F600}"]
    for (index, name) in names.enumerated() { try box.writeFile("Documents/" + name, bytes("\(index)")) }
    #expect(Set(try box.list("Documents")) == Set(names))
    #expect(try box.list("Documents").count == names.count)
    for (index, name) in names.enumerated() { #expect(try box.contents("Documents/" + name) == bytes("\(index)")) }
  }
}
