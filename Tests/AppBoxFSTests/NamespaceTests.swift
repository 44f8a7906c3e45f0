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
}
