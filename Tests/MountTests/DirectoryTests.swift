import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// opendir/readdir/releasedir, fsyncdir, large and deep directories.
@Suite("Directories", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct DirectoryTests {
  @Test("readdir lists each entry once with its d_type, plus . and ..")
  func readdirTypes() throws {
    let fixture = try MountFixture.unlocked()
    let dir = fixture.path("Documents/d")
    #expect(mkdir(dir, 0o755) == 0)
    try writeFile(dir + "/file", [])
    #expect(mkdir(dir + "/sub", 0o755) == 0)
    #expect(symlink("file", dir + "/link") == 0)
    #expect(mkfifo(dir + "/fifo", 0o644) == 0)
    let entries = try directoryEntries(dir)
    #expect(entries.count == 4)
    let types = Dictionary(uniqueKeysWithValues: entries.map { ($0.string, Int32($0.type)) })
    #expect(types["file"] == Int32(DT_REG))
    #expect(types["sub"] == Int32(DT_DIR))
    #expect(types["link"] == Int32(DT_LNK))
    #expect(types["fifo"] == Int32(DT_FIFO))
    // . and .. are there too.
    guard let stream = opendir(dir) else { throw SyscallError(call: "opendir", code: errno) }
    var names: [String] = []
    while let entry = readdir(stream) {
      names.append(
        withUnsafePointer(to: &entry.pointee.d_name) {
          String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
        })
    }
    closedir(stream)
    #expect(names.sorted() == [".", "..", "fifo", "file", "link", "sub"])
    #expect(try directoryEntries(fixture.path("Documents/d/sub")).isEmpty)
    try fixture.unmount()
  }

  @Test("the kernel opens a single-app mount's directories on its own: listings send no opendir or releasedir; a device's do")
  func opendirRequests() throws {
    let fixture = try MountFixture.unlocked()
    let dir = fixture.path("Documents/d")
    #expect(mkdir(dir, 0o755) == 0)
    for i in 0..<3 { try writeFile(dir + "/f\(i)", []) }
    for _ in 0..<5 { #expect(try directoryNames(dir).sorted() == ["f0", "f1", "f2"]) }
    try writeFile(dir + "/f3", [])  // a change the next listing shows
    #expect(try directoryNames(dir).sorted() == ["f0", "f1", "f2", "f3"])
    #expect(try fixture.requestCount("opendir") <= 1, "at most the first, answered ENOSYS")
    #expect(try fixture.requestCount("releasedir") == 0)
    try fixture.unmount()

    let device = try DeviceMountTests.device()
    let before = try device.requestCount("opendir")
    for _ in 0..<5 { _ = try directoryNames(device.path(DeviceMountTests.app(DeviceMountTests.a) + "/Documents")) }
    #expect(try device.requestCount("opendir") >= before + 5, "a device's opendir confines: each one is asked")
    try device.unmount()
  }

  @Test("opendir errors: ENOENT for a missing directory, ENOTDIR for a file")
  func opendirErrors() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/f"), [])
    #expect(opendir(fixture.path("Documents/missing")) == nil && errno == ENOENT)
    #expect(opendir(fixture.path("Documents/f")) == nil && errno == ENOTDIR)
    try fixture.unmount()
  }

  @Test("10,000 files in one directory: readdir returns every name exactly once")
  func tenThousandFiles() throws {
    let fixture = try MountFixture.unlocked()
    let dir = fixture.path("Library/Caches/many")
    #expect(mkdir(dir, 0o755) == 0)
    let count = 10_000
    for i in 0..<count {
      let fd = open(dir + "/entry-\(i)", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
      try check(fd, "create entry-\(i)")
      close(fd)
    }
    let names = try directoryEntries(dir).map(\.string)
    #expect(names.count == count)
    #expect(Set(names).count == count, "duplicates in readdir")
    #expect(Set(names) == Set((0..<count).map { "entry-\($0)" }))
    #expect(try directoryEntries(fixture.backingPath("Library/Caches/many")).count == count)
    // ls through readdirplus agrees.
    let listed = try Command.shell("ls -1 " + shellQuote(dir) + " | wc -l")
    #expect(listed.trimmingCharacters(in: .whitespacesAndNewlines) == "\(count)")
    // And everything can be removed again.
    for i in 0..<count { try check(unlink(dir + "/entry-\(i)"), "unlink entry-\(i)") }
    #expect(rmdir(dir) == 0)
    try fixture.unmount()
  }

  @Test("readdir with creates interleaved: every entry that existed at opendir appears exactly once, no duplicates")
  func interleavedCreates() throws {
    let fixture = try MountFixture.unlocked()
    let dir = fixture.path("Documents/growing")
    #expect(mkdir(dir, 0o755) == 0)
    let initial = Set((0..<2000).map { "old-\($0)" })
    for name in initial { try writeFile(dir + "/" + name, []) }
    guard let stream = opendir(dir) else { throw SyscallError(call: "opendir", code: errno) }
    var seen: [String] = []
    var created = 0
    while true {
      let batch = try readEntries(stream, limit: 50).map(\.string)
      if batch.isEmpty { break }
      seen += batch
      for _ in 0..<10 {
        try writeFile(dir + "/new-\(created)", [])
        created += 1
      }
    }
    closedir(stream)
    #expect(Set(seen).count == seen.count, "readdir returned duplicates")
    #expect(initial.isSubset(of: Set(seen)), "missing: \(initial.subtracting(seen).sorted().prefix(5))")
    #expect(Set(seen).isSubset(of: initial.union((0..<created).map { "new-\($0)" })))
    #expect(try directoryEntries(dir).count == initial.count + created)
    try fixture.unmount()
  }

  @Test("readdir with unlinks interleaved: entries still present at the end appear exactly once")
  func interleavedUnlinks() throws {
    let fixture = try MountFixture.unlocked()
    let dir = fixture.path("tmp/shrinking")
    #expect(mkdir(dir, 0o755) == 0)
    let all = (0..<1000).map { "f-\($0)" }
    for name in all { try writeFile(dir + "/" + name, []) }
    guard let stream = opendir(dir) else { throw SyscallError(call: "opendir", code: errno) }
    var seen: [String] = []
    var removed = Set<String>()
    while true {
      let batch = try readEntries(stream, limit: 25).map(\.string)
      if batch.isEmpty { break }
      seen += batch
      // Remove some names not read yet (odd numbers).
      for name in all where !removed.contains(name) && !seen.contains(name) && removed.count < 200 {
        if Int(name.dropFirst(2))! % 2 == 1 {
          #expect(unlink(dir + "/" + name) == 0)
          removed.insert(name)
          if removed.count % 5 == 0 { break }
        }
      }
    }
    closedir(stream)
    #expect(Set(seen).count == seen.count, "readdir returned duplicates")
    let kept = Set(all).subtracting(removed)
    #expect(kept.isSubset(of: Set(seen)), "missing: \(kept.subtracting(seen).sorted().prefix(5))")
    #expect(Set(try directoryNames(dir)) == kept)
    try fixture.unmount()
  }

  @Test("rewinddir and seekdir/telldir replay the same entries")
  func rewindAndSeek() throws {
    let fixture = try MountFixture.unlocked()
    let dir = fixture.path("Documents/d")
    #expect(mkdir(dir, 0o755) == 0)
    for i in 0..<300 { try writeFile(dir + "/n\(i)", []) }
    guard let stream = opendir(dir) else { throw SyscallError(call: "opendir", code: errno) }
    let first = try readEntries(stream, limit: 100)
    let mark = telldir(stream)
    let rest = try readEntries(stream, limit: .max)
    #expect(first.count + rest.count == 300)
    seekdir(stream, mark)
    #expect(try readEntries(stream, limit: .max) == rest)
    rewinddir(stream)
    #expect(try readEntries(stream, limit: .max) == first + rest)
    closedir(stream)
    try fixture.unmount()
  }

  @Test("fsyncdir: fsync and fdatasync on a directory descriptor succeed")
  func fsyncdir() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/f"), bytes("x"))
    let fd = try openFile(fixture.path("Documents"), O_RDONLY | O_DIRECTORY)
    #expect(errnoOf(fsync(fd)) == 0)
    #expect(errnoOf(fdatasync(fd)) == 0)
    close(fd)
    try fixture.unmount()
  }

  @Test("a 100-level deep tree: create, stat and write the leaf, remove it all")
  func deepTree() throws {
    let fixture = try MountFixture.unlocked()
    var path = fixture.path("Documents")
    var components: [String] = []
    for level in 0..<100 {
      path += "/level\(level)"
      components.append(path)
      try check(mkdir(path, 0o755), "mkdir level \(level)")
    }
    try writeFile(path + "/leaf", bytes("deep"))
    let leaf = try statPath(path + "/leaf")
    #expect(fileType(leaf) == S_IFREG)
    #expect(leaf.st_size == 4)
    #expect(try readFile(path + "/leaf") == bytes("deep"))
    let backingLeaf = fixture.backingPath(String(path.dropFirst(fixture.mountpoint.count + 1)) + "/leaf")
    #expect(try readFile(backingLeaf) == bytes("deep"))
    // Walk down with openat, as `find` would.
    var fd = try openFile(fixture.path("Documents"), O_RDONLY | O_DIRECTORY)
    for level in 0..<100 {
      let next = openat(fd, "level\(level)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      close(fd)
      fd = try check(next, "openat level \(level)")
    }
    var st = stat()
    #expect(fstatat(fd, "leaf", &st, 0) == 0)
    #expect(st.st_ino == leaf.st_ino)
    close(fd)
    #expect(errnoOf(rmdir(fixture.path("Documents/level0"))) == ENOTEMPTY)
    #expect(unlink(path + "/leaf") == 0)
    for directory in components.reversed() { try check(rmdir(directory), "rmdir \(directory)") }
    #expect(try directoryNames(fixture.path("Documents")) == [])
    #expect(try directoryNames(fixture.backingPath("Documents")) == [])
    try fixture.unmount()
  }

  @Test("rm -r of a populated tree through the mount removes it from the backing dir")
  func recursiveRemove() throws {
    let fixture = try MountFixture.unlocked()
    try Command.shell(
      "cd " + shellQuote(fixture.path("Library/Caches"))
        + " && mkdir -p a/b/c a/d && touch a/1 a/b/2 a/b/c/3 && ln -s ../1 a/d/l && mkfifo a/p")
    #expect(try directoryNames(fixture.backingPath("Library/Caches/a")) == ["1", "b", "d", "p"])
    try Command.shell("rm -r " + shellQuote(fixture.path("Library/Caches/a")))
    #expect(try directoryNames(fixture.backingPath("Library/Caches")) == [])
    try fixture.unmount()
  }
}
