import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// Listings, attributes, access checks and seeks: the requests' own answers.
@Suite("Listings, attributes and seeks through the protocol")
struct RequestTests {
  /// Lists `path` in replies of `capacity` entries, each from where the last stopped;
  /// through an open handle, or without one, as the kernel reads a directory it opened on
  /// its own.
  static func listInPieces(
    _ box: Sandbox, _ path: String, capacity: Int, plus: Bool = false, opened: Bool = true
  ) throws -> [[UInt8]] {
    let node = try box.lookup(path)
    let handle = opened ? try box.fs.opendir(Sandbox.root, node: node, flags: O_RDONLY).handle : .none
    defer { if opened { box.fs.releasedir(Sandbox.root, node: node, handle: handle) } }
    var names: [[UInt8]] = []
    var offset: off_t = 0
    while true {
      var filler = ListFiller(plus: plus, capacity: capacity)
      try box.fs.readdir(Sandbox.root, node: node, handle: handle, offset: offset, filler: &filler)
      if filler.names.isEmpty { return names }
      names += filler.names
      offset = filler.nextOffset
    }
  }

  @Test(
    "readdir lists each entry once with . and .., in replies of any size, from the offset asked for, with or without a handle",
    arguments: [true, false])
  func readdirInPieces(opened: Bool) throws {
    let box = try Sandbox()
    #expect(!box.fs.needsOpendir, "a single-app mount lets the kernel open directories")
    for index in 0..<100 { box.release(try box.create("Documents/f\(index)")) }
    for capacity in [1, 7, 1000] {
      let names = try Self.listInPieces(box, "Documents", capacity: capacity, opened: opened).map {
        String(decoding: $0, as: UTF8.self)
      }
      #expect(names.count == 102, "capacity \(capacity)")
      #expect(Set(names) == Set((0..<100).map { "f\($0)" } + [".", ".."]))
    }
  }

  @Test("readdir again from offset 0 lists everything again (rewinddir)")
  func rewind() throws {
    let box = try Sandbox()
    for index in 0..<10 { box.release(try box.create("Documents/f\(index)")) }
    let node = try box.lookup("Documents")
    let handle = try box.fs.opendir(Sandbox.root, node: node, flags: O_RDONLY).handle
    defer { box.fs.releasedir(Sandbox.root, node: node, handle: handle) }
    var first = ListFiller(plus: false)
    try box.fs.readdir(Sandbox.root, node: node, handle: handle, offset: 0, filler: &first)
    var again = ListFiller(plus: false)
    try box.fs.readdir(Sandbox.root, node: node, handle: handle, offset: 0, filler: &again)
    #expect(Set(first.names) == Set(again.names) && first.names.count == 12)
  }

  @Test("readdirplus gives each entry its attributes and generation; . and .. hold no lookup")
  func readdirplusEntries() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", pattern(5000))
    try box.mkdir("Documents/d")
    let node = try box.lookup("Documents")
    let handle = try box.fs.opendir(Sandbox.root, node: node, flags: O_RDONLY).handle
    defer { box.fs.releasedir(Sandbox.root, node: node, handle: handle) }
    var filler = ListFiller(plus: true)
    try box.fs.readdir(Sandbox.root, node: node, handle: handle, offset: 0, filler: &filler)
    for (name, entry) in zip(filler.names, filler.entries) {
      switch String(decoding: name, as: UTF8.self) {
      case ".", "..": #expect(entry.node.rawValue == 0)
      case "f":
        #expect(entry.attributes.st_size == 5000 && entry.generation == box.fs.generation)
        #expect(entry.node == (try box.lookup("Documents/f")))
      case "d": #expect(entry.attributes.st_mode & S_IFMT == S_IFDIR)
      default: Issue.record("unexpected \(name)")
      }
    }
  }

  @Test("an entry removed between the listing's read and its lookup is left out of readdirplus, not an error")
  func readdirplusRemovedEntry() throws {
    let box = try Sandbox()
    for index in 0..<3 { try box.writeFile("Documents/f\(index)", [1]) }
    let node = try box.lookup("Documents")
    let handle = try box.fs.opendir(Sandbox.root, node: node, flags: O_RDONLY).handle
    defer { box.fs.releasedir(Sandbox.root, node: node, handle: handle) }
    var first = ListFiller(plus: true, capacity: 1)
    try box.fs.readdir(Sandbox.root, node: node, handle: handle, offset: 0, filler: &first)
    for index in 0..<3 { try? box.unlink("Documents/f\(index)") }  // the stream may have read them already
    var rest = ListFiller(plus: true)
    try box.fs.readdir(Sandbox.root, node: node, handle: handle, offset: first.nextOffset, filler: &rest)
    #expect(
      rest.entries.allSatisfy {
        $0.node.rawValue == 0 || (try? box.fs.getattr(Sandbox.root, node: $0.node, handle: nil)) != nil
      })
  }

  @Test("readdir of a directory removed while open ends at once; its handle still releases")
  func listingOfRemovedDirectory() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/d")
    let node = try box.lookup("Documents/d")
    let handle = try box.fs.opendir(Sandbox.root, node: node, flags: O_RDONLY).handle
    try box.rmdir("Documents/d")
    var filler = ListFiller(plus: false)
    try box.fs.readdir(Sandbox.root, node: node, handle: handle, offset: 0, filler: &filler)
    #expect(filler.names.filter { $0 != [0x2E] && $0 != [0x2E, 0x2E] }.isEmpty)
    box.fs.releasedir(Sandbox.root, node: node, handle: handle)
    try box.expectExactBooks()
  }

  @Test("without a handle, readdir of a removed directory ends at once and fsyncdir syncs")
  func withoutHandle() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/d")
    let node = try box.lookup("Documents/d")
    try box.fs.fsyncdir(Sandbox.root, node: node, handle: .none, dataOnly: false)
    try box.fs.fsyncdir(Sandbox.root, node: node, handle: .none, dataOnly: true)
    try box.rmdir("Documents/d")
    var filler = ListFiller(plus: true)
    try box.fs.readdir(Sandbox.root, node: node, handle: .none, offset: 0, filler: &filler)
    #expect(filler.names.filter { $0 != [0x2E] && $0 != [0x2E, 0x2E] }.isEmpty)
    try box.expectExactBooks()
  }

  @Test("setattr: the mode, owner and times, by path and through a handle, as the backing file shows them")
  func setattrFields() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    try box.chmod("Documents/f", 0o640)
    #expect(try box.backingStat("Documents/f").st_mode & 0o7777 == 0o640)
    var owner = stat()
    owner.st_uid = 1234
    let node = try box.lookup("Documents/f")
    let after = try box.fs.setattr(Sandbox.root, node: node, attributes: owner, fields: .uid, handle: nil)
    #expect(after.st_uid == 1234 && after.st_gid == 0, "only the field asked for")
    try box.setTimes("Documents/f", seconds: 1_000_000_000)
    #expect(try box.backingStat("Documents/f").st_mtim.tv_sec == 1_000_000_000)
    #expect(try box.backingStat("Documents/f").st_atim.tv_sec == 1_000_000_000)
    let file = try box.open("Documents/f", flags: O_RDWR)
    var mode = stat()
    mode.st_mode = 0o600
    var mtime = stat()
    mtime.st_mtim = timespec(tv_sec: 1_100_000_000, tv_nsec: 5)
    _ = try box.fs.setattr(Sandbox.root, node: node, attributes: mode, fields: .mode, handle: file.handle)
    let timed = try box.fs.setattr(Sandbox.root, node: node, attributes: mtime, fields: .mtime, handle: file.handle)
    #expect(timed.st_mode & 0o7777 == 0o600)
    #expect(timed.st_mtim.tv_sec == 1_100_000_000 && timed.st_mtim.tv_nsec == 5)
    #expect(timed.st_atim.tv_sec == 1_000_000_000, "the other time untouched (UTIME_OMIT)")
    box.release(file)
  }

  @Test("setattr of the times to now, on a file and on a symlink itself")
  func setattrNow() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    try box.setTimes("Documents/f", seconds: 1_000_000_000)
    let link = try box.symlink("f", at: "Documents/link")
    let now = Int(Clock.unix())
    for node in [link, try box.lookup("Documents/f")] {
      let st = try box.fs.setattr(
        Sandbox.root, node: node, attributes: stat(), fields: [.atimeNow, .mtimeNow], handle: nil)
      #expect(abs(st.st_mtim.tv_sec - now) < 60 && abs(st.st_atim.tv_sec - now) < 60)
      if node == link {
        #expect(
          try box.backingStat("Documents/f").st_mtim.tv_sec == 1_000_000_000, "the link's times, not its target's")
      }
    }
  }

  @Test(
    "access is checked with the caller's credentials: another user cannot write a 0644 root file",
    .enabled(if: geteuid() == 0))
  func accessAsCaller() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", [1])
    let node = try box.lookup("Documents/f")
    try box.fs.access(Sandbox.nobody, node: node, mask: R_OK)
    #expect(throws: Errno.accessDenied) { try box.fs.access(Sandbox.nobody, node: node, mask: W_OK) }
    try box.fs.access(Sandbox.root, node: node, mask: W_OK)
    #expect(throws: Errno.accessDenied, "X_OK needs an x bit, even for root") {
      try box.fs.access(Sandbox.root, node: node, mask: X_OK)
    }
  }

  @Test("lseek finds a sparse file's data and hole")
  func seekDataAndHole() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/sparse")
    #expect(try box.write(file, pattern(4096), at: 1 << 20) == 4096)
    #expect(
      try box.fs.lseek(Sandbox.root, node: file.node, handle: file.handle, offset: 0, whence: Linux.seekData) == 1 << 20
    )
    #expect(
      try box.fs.lseek(Sandbox.root, node: file.node, handle: file.handle, offset: 0, whence: Linux.seekHole) == 0)
    #expect(throws: Errno.self) {
      try box.fs.lseek(Sandbox.root, node: file.node, handle: file.handle, offset: 2 << 20, whence: Linux.seekData)
    }
    box.release(file)
  }

  @Test("readlink gives a symlink's target as its bytes; getattr of it is the link's")
  func readlink() throws {
    let box = try Sandbox()
    let target = String(repeating: "long/", count: 200) + "end"
    try box.symlink(target, at: "Documents/link")
    #expect(try box.readlink("Documents/link") == target)
    #expect(try box.getattr("Documents/link").st_size == target.utf8.count)
    try box.expectExactBooks()
  }
}
