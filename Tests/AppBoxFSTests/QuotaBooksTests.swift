import FilesystemInterface
import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// The quota's books under every path that changes an allocation: each test ends with the
/// books exact (usage by domain and purgeable bytes as a fresh scan finds them, the total
/// and each domain as `du` counts them).
@Suite("Quota books through the protocol")
struct QuotaBooksTests {
  static let keepSize = Linux.fallocKeepSize
  static let punchHole = Linux.fallocPunchHole | Linux.fallocKeepSize
  static let zeroRange: Int32 = 0x10

  /// A root attribute's value as a number.
  static func rootNumber(_ box: Sandbox, _ attribute: AppBoxAttribute) throws -> Int64? {
    Int64(String(decoding: try box.getxattr("", attribute.name), as: UTF8.self))
  }

  @Test("a mount's index, writes, truncates, unlinks, renames across domains, mkdir, symlink: used == du throughout")
  func everydayOperations() throws {
    let box = try Sandbox(
      capacity: 20 << 20,
      prepare: { backing in
        try Sys.mkdir(backing + "/Documents", 0o755)
        try Sys.mkdir(backing + "/Documents/old", 0o755)
        try TestFiles.write(backing + "/Documents/old/x", pattern(300_000, seed: 3))
      })
    try box.expectExactBooks()
    try box.writeFile("Documents/a", pattern(1_000_000))
    try box.writeFile("Library/Caches/b", pattern(500_000))
    try box.writeFile("tmp/c", pattern(200_001))
    try box.truncate("Documents/a", to: 10_000)
    try box.rename("tmp/c", to: "Documents/c")
    try box.rename("Documents/old/x", to: "Library/Caches/x")
    try box.unlink("Library/Caches/b")
    try box.mkdir("Library/Preferences/p")
    try box.symlink("../Documents/a", at: "tmp/link")
    try box.expectExactBooks()
    #expect(box.purgeable[.caches] == Sandbox.diskUsage(box.backing + "/Library/Caches/x"))
    #expect(box.purgeable[.tmp] == 0)
    let free = box.free
    #expect(try Self.rootNumber(box, .capacity) == 20 << 20)
    #expect(try Self.rootNumber(box, .availableImportant) == free + box.purgeable[.caches]!)
    #expect(try Self.rootNumber(box, .availableOpportunistic) == free)
  }

  /// ext4 allocates a fragmented file's extent-tree block when it writes the file's pages
  /// back (delayed allocation), and frees it when the I/O ends and the extents merge back
  /// into the inode (the gaps written): the kernel's flusher may do either seconds after
  /// the release measured the file, so the release writes the pages back and waits first.
  /// The `fsync` of the backing file here stands for the flusher (or anyone's `sync`); on
  /// a backing filesystem without delayed allocation the books are exact either way.
  @Test("what the backing filesystem allocates and frees at write-back is on the books at the release")
  func writebackMetadataAtRelease() throws {
    let box = try Sandbox(capacity: 20 << 20)
    for (first, booksAfter) in [(0, "scattered writes"), (4096, "the gaps written")] {
      for name in ["Documents/scattered", "tmp/scattered"] {
        let file = try first == 0 ? box.create(name) : box.open(name, flags: O_WRONLY)
        for index in 0..<40 {
          let offset = off_t(index) * 8192 + off_t(first)
          #expect(try box.write(file, pattern(4096, seed: UInt64(index)), at: offset) == 4096)
        }
        box.release(file)
        let fd = try Sys.open(box.backing + "/" + name, O_RDONLY | O_CLOEXEC)
        defer { Sys.close(fd) }
        try Sys.fsync(fd, dataOnly: false)  // the write-back, behind AppBox's back
      }
      #expect(box.used == Sandbox.diskUsage(box.backing), "after \(booksAfter)")
      try box.expectExactBooks()
    }
  }

  /// Data written in order, not written back yet, then unwritten extents fallocated past
  /// it: ext4 places the data beside them at write-back, and the fifth extent takes an
  /// extent-tree block. The release of the handle that fallocated writes it back.
  @Test("a fallocate beside data not written back yet: what write-back allocates is on the books at its release")
  func fallocateBesideDirtyData() throws {
    let box = try Sandbox(capacity: 20 << 20)
    let writer = try box.create("Documents/f")
    #expect(try box.write(writer, pattern(40960)) == 40960)
    box.release(writer)
    let file = try box.open("Documents/f", flags: O_RDWR)
    for index in 1...4 { try box.fallocate(file, mode: Self.keepSize, offset: off_t(index) << 20, length: 4096) }
    box.release(file)
    let fd = try Sys.open(box.backing + "/Documents/f", O_RDONLY | O_CLOEXEC)
    defer { Sys.close(fd) }
    try Sys.fsync(fd, dataOnly: false)  // the write-back, behind AppBox's back
    try box.expectExactBooks()
  }

  @Test("a file written in order, without holes, is left to the kernel's flusher: its release waits for no write-back")
  func inOrderWritesNotWrittenBack() throws {
    let box = try Sandbox(capacity: 20 << 20)
    let file = try box.create("Documents/log")
    for index in 0..<40 { #expect(try box.write(file, pattern(5000), at: off_t(index) * 5000) == 5000) }
    SyscallFaults.inject([:]) { faults in
      box.release(file)
      #expect(faults.calls(.syncFileRange) == 0)
    }
    try box.expectExactBooks()
  }

  @Test("the available capacities: important counts everything purgeable, opportunistic only tmp")
  func availableCapacities() throws {
    let box = try Sandbox(capacity: 20 << 20)
    try box.writeFile("Library/Caches/c", pattern(300_000))
    try box.writeFile("tmp/t", pattern(100_000))
    let open = try box.open("Library/Caches/c")  // open: not purgeable now
    let free = box.free
    let (caches, tmp) = (box.purgeable[.caches]!, box.purgeable[.tmp]!)
    #expect(caches == 0 && tmp > 0)
    #expect(try Self.rootNumber(box, .availableImportant) == free + tmp)
    #expect(try Self.rootNumber(box, .availableOpportunistic) == free + tmp)
    box.release(open)
    #expect(try Self.rootNumber(box, .availableImportant) == free + tmp + box.purgeable[.caches]!)
    #expect(try Self.rootNumber(box, .availableOpportunistic) == free + tmp)
    let status = box.status
    #expect(TestFiles.number(status, "availableImportant") == free + tmp + box.purgeable[.caches]!)
    #expect(TestFiles.number(status, "availableOpportunistic") == free + tmp)
  }

  @Test("statfs shows the capacity and the free bytes in 4 KiB blocks, and the backing's name length")
  func statfsFigures() throws {
    let box = try Sandbox(capacity: 20 << 20)
    try box.writeFile("Documents/f", pattern(123_456))
    let st = try box.statfs()
    #expect(st.f_bsize == 4096 && st.f_frsize == 4096)
    #expect(Int64(st.f_blocks) == (20 << 20) / 4096)
    #expect(Int64(st.f_bfree) == box.free / 4096)
    #expect(st.f_bavail == st.f_bfree)
    #expect(st.f_namemax >= 255)
    _ = box.fs.resize(to: 8 << 20, reason: .resize)
    #expect(Int64(try box.statfs().f_blocks) == (8 << 20) / 4096)
  }

  @Test("a write inside what is allocated charges nothing more; past it, what the file allocates")
  func writes() throws {
    let box = try Sandbox()
    let file = try box.create("Documents/f")
    #expect(try box.write(file, pattern(100_000)) == 100_000)
    let after = box.used
    #expect(try box.write(file, pattern(50_000, seed: 2), at: 10_000) == 50_000)
    #expect(box.used == after, "an overwrite allocates nothing")
    #expect(try box.write(file, pattern(8192, seed: 3), at: 10 << 20) == 8192, "far past the end: a sparse file")
    #expect(box.used - after < 64 * 1024, "only the blocks written are charged")
    box.release(file)
    try box.expectExactBooks()
  }

  @Test("every fallocate mode, on preallocated, written and punched blocks: the books exact after each call")
  func fallocateModes() throws {
    let box = try Sandbox(capacity: 20 << 20)
    let file = try box.create("Documents/f")
    let calls: [(String, () throws(Errno) -> Void)] = [
      ("preallocate 1 MiB", { () throws(Errno) in try box.fallocate(file, offset: 0, length: 1 << 20) }),
      ("write 100 KiB into it", { () throws(Errno) in _ = try box.write(file, pattern(100_000), at: 300_000) }),
      (
        "punch 4 KiB of preallocated blocks",
        { () throws(Errno) in try box.fallocate(file, mode: Self.punchHole, offset: 8192, length: 4096) }
      ),
      (
        "punch across written blocks",
        { () throws(Errno) in try box.fallocate(file, mode: Self.punchHole, offset: 290_816, length: 65_536) }
      ),
      (
        "preallocate past the end, size kept",
        { () throws(Errno) in try box.fallocate(file, mode: Self.keepSize, offset: 1 << 20, length: 512 << 10) }
      ),
      (
        "zero a range over a hole",
        { () throws(Errno) in try box.fallocate(file, mode: Self.zeroRange, offset: 4096, length: 16_384) }
      ),
      (
        "zero a range over written blocks and past the end",
        { () throws(Errno) in try box.fallocate(file, mode: Self.zeroRange, offset: 393_216, length: 2 << 20) }
      ),
      (
        "punch the whole file",
        { () throws(Errno) in try box.fallocate(file, mode: Self.punchHole, offset: 0, length: 4 << 20) }
      ),
    ]
    for (name, call) in calls {
      do throws(Errno) { try call() } catch { Issue.record("\(name): \(error)") }
      try box.expectExactBooks()
    }
    box.release(file)
    try box.expectExactBooks()
  }

  @Test("fallocate is all or nothing: what does not fit is ENOSPC and allocates nothing; a punch always goes")
  func fallocateAllOrNothing() throws {
    let box = try Sandbox(capacity: 4 << 20)
    let file = try box.create("Documents/f")
    #expect(try box.write(file, pattern(1 << 20)) == 1 << 20)
    let used = box.used
    #expect(throws: Errno.noSpace) { try box.fallocate(file, offset: 1 << 20, length: 8 << 20) }
    #expect(box.used == used)
    _ = box.fs.resize(to: box.used, reason: .resize)  // nothing free at all
    try box.fallocate(file, mode: Self.punchHole, offset: 0, length: 512 << 10)
    #expect(box.used < used, "a punch frees blocks, full or not")
    #expect(box.fs.storage.books.withLock { $0.noSpaceRefusals } == 1)
    box.release(file)
    try box.expectExactBooks()
  }

  @Test(
    "a fallocate that fails on a full backing filesystem (a 16 MiB tmpfs) passes ENOSPC on and leaves used == du",
    .enabled(if: geteuid() == 0, "mounting a tmpfs needs root"))
  func failedFallocateIsCharged() throws {
    let box = try Sandbox(capacity: 64 << 20, tmpfs: "size=16m")
    let file = try box.create("Documents/big")
    #expect(throws: Errno.noSpace) { try box.fallocate(file, offset: 0, length: 40 << 20) }
    box.release(file)
    try box.expectExactBooks()
    #expect(box.fs.storage.books.withLock { $0.noSpaceRefusals } == 0, "the backing's ENOSPC, not the quota's")
  }

  @Test("truncate by path and through a handle: growing allocates nothing, shrinking gives blocks back")
  func truncates() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/f", pattern(500_000))
    try box.truncate("Documents/f", to: 4 << 20)
    #expect(try box.getattr("Documents/f").st_size == 4 << 20)
    try box.expectExactBooks()
    try box.truncate("Documents/f", to: 1000)
    try box.expectExactBooks()
    let file = try box.open("Documents/f", flags: O_RDWR)
    #expect(try box.write(file, pattern(200_000), at: 0) == 200_000)
    try box.truncate(file, to: 10)
    try box.expectExactBooks()
    #expect(try box.contents("Documents/f") == Array(pattern(200_000).prefix(10)))
    box.release(file)
    try box.expectExactBooks()
  }

  @Test(
    "an O_TRUNC open gives the file's bytes back while it is open and after its close",
    arguments: ["Documents/file", "Library/Caches/file"])
  func openTruncate(_ path: String) throws {
    let box = try Sandbox(capacity: 20 << 20)
    try box.writeFile(path, pattern(1 << 20))
    try box.expectExactBooks()
    let file = try box.open(path, flags: O_WRONLY | O_TRUNC)
    try box.expectExactBooks()
    box.release(file)
    try box.expectExactBooks()
    // And through a create of the existing name (creat(2)'s flags, a name the kernel has
    // not looked up).
    try box.writeFile(path, pattern(1 << 20))
    box.release(try box.create(path, flags: O_WRONLY | O_TRUNC))
    #expect(try box.backingStat(path).st_size == 0)
    try box.expectExactBooks()
  }

  @Test("an O_TRUNC open that writes nothing gives the blocks back at once")
  func truncatingOpenIsMeasured() throws {
    let box = try Sandbox(capacity: 20 << 20)
    try box.writeFile("Documents/t", pattern(1 << 20))
    let before = box.usage[.documents]!
    let file = try box.open("Documents/t", flags: O_WRONLY | O_TRUNC)
    #expect(box.usage[.documents]! <= before - (1 << 20), "given back before any write or close")
    box.release(file)
    try box.expectExactBooks()
  }

  @Test("copy_file_range is charged like a write")
  func copyFileRange() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/source", pattern(700_000))
    let source = try box.open("Documents/source")
    let target = try box.create("Library/Caches/target")
    var copied = 0
    while copied < 700_000 {
      let count = try box.copy(from: source, at: off_t(copied), to: target, at: off_t(copied), count: 700_000 - copied)
      #expect(count > 0)
      copied += count
    }
    try box.expectExactBooks()
    box.release(target)
    box.release(source)
    #expect(try box.backingContents("Library/Caches/target") == pattern(700_000))
    #expect(box.purgeable[.caches]! >= 700_000)
    try box.expectExactBooks()
  }

  @Test("a directory that grows with many entries is counted as du counts it")
  func directoryGrowth() throws {
    let box = try Sandbox(capacity: 20 << 20)
    for domain in ["Documents/many", "Library/Caches/many"] {
      try box.mkdir(domain)
      for index in 0..<400 {
        box.release(try box.create(domain + "/" + String(repeating: "n", count: 60) + String(index)))
      }
    }
    #expect(try box.backingStat("Documents/many").st_blocks * 512 > 4096, "the directory grew")
    try box.expectExactBooks()
    for index in 0..<400 { try box.unlink("Documents/many/" + String(repeating: "n", count: 60) + String(index)) }
    try box.rmdir("Documents/many")
    try box.expectExactBooks()
  }

  @Test("mkdir, symlink, mknod (FIFO, socket, regular file) and rmdir: each charged as du counts it, in its domain")
  func namespaceNodes() throws {
    let box = try Sandbox()
    for domain in ["Documents", "Library/Preferences", "Library/Caches", "tmp"] {
      try box.mkdir(domain + "/d")
      try box.symlink(String(repeating: "t", count: 300), at: domain + "/long-link")
      try box.symlink("short", at: domain + "/short-link")
      try box.mknod(domain + "/fifo", mode: S_IFIFO | 0o644)
      try box.mknod(domain + "/socket", mode: S_IFSOCK | 0o644)
      try box.mknod(domain + "/regular", mode: S_IFREG | 0o644)
      try box.expectExactBooks()
      try box.rmdir(domain + "/d")
      for name in ["long-link", "short-link", "fifo", "socket", "regular"] { try box.unlink(domain + "/" + name) }
      try box.expectExactBooks()
    }
  }

  @Test("rename over an existing file gives the replaced file's bytes back, in its own domain")
  func renameOverExisting() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/a", pattern(300_000))
    try box.writeFile("Documents/b", pattern(100_000))
    try box.writeFile("Library/Caches/c", pattern(200_000))
    try box.rename("Documents/a", to: "Documents/b")
    try box.expectExactBooks()
    try box.rename("Documents/b", to: "Library/Caches/c")
    #expect(box.purgeableFiles == 1, "the file now in Caches replaced the one there, and is purgeable")
    try box.expectExactBooks()
    try box.rename("Library/Caches/c", to: "Library/Caches/c")  // onto itself: nothing
    try box.expectExactBooks()
  }

  @Test("a file moves freely between domains, its bytes and inode with it")
  func fileRenameAcrossDomains() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/f", pattern(50_000, seed: 8))
    let node = try box.lookup("tmp/f")
    let ino = try box.backingStat("tmp/f").st_ino
    try box.rename("tmp/f", to: "Documents/f")
    #expect(try box.lookup("Documents/f") == node)
    #expect(try box.backingStat("Documents/f").st_ino == ino)
    #expect(box.purgeable[.tmp] == 0)
    try box.expectExactBooks()
    try box.rename("Documents/f", to: "Library/Caches/f")
    #expect(try box.contents("Library/Caches/f") == pattern(50_000, seed: 8))
    #expect(box.backingList("tmp") == [] && box.backingList("Documents") == [])
    #expect(box.purgeable[.caches]! > 0)
    try box.expectExactBooks()
  }

  @Test("RENAME_EXCHANGE of two files in different domains swaps them and their books")
  func exchangeFilesAcrossDomains() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/a", pattern(100_000))
    try box.writeFile("Library/Caches/b", pattern(300_000, seed: 2))
    try box.rename("Documents/a", to: "Library/Caches/b", flags: Linux.renameExchange)
    #expect(try box.contents("Documents/a") == pattern(300_000, seed: 2))
    #expect(try box.backingContents("Library/Caches/b") == pattern(100_000))
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.caches)).files == 1)
    #expect(box.backingHas("Documents/a"), "what came from Caches is in Documents now: never purged")
    try box.expectExactBooks()
  }

  @Test("RENAME_NOREPLACE over an existing name is EEXIST and changes nothing; to a new name it moves")
  func noReplaceFiles() throws {
    let box = try Sandbox()
    try box.writeFile("tmp/a", pattern(100_000))
    try box.writeFile("Documents/a", pattern(10_000))
    #expect(throws: Errno.exists) { try box.rename("tmp/a", to: "Documents/a", flags: Linux.renameNoReplace) }
    #expect(try box.contents("Documents/a") == pattern(10_000))
    try box.expectExactBooks()
    try box.rename("tmp/a", to: "Documents/b", flags: Linux.renameNoReplace)
    try box.expectExactBooks()
  }

  @Test(
    "an unlinked file stays readable and writable through its handle; its bytes, and what is written through it, stay charged until its last handle is released"
  )
  func unlinkOpenFile() throws {
    let box = try Sandbox()
    let file = try box.create("Library/Caches/f")
    #expect(try box.write(file, pattern(200_000)) == 200_000)
    try box.unlink("Library/Caches/f")
    // `du` no longer sees it; the backing filesystem still holds its blocks.
    let held = { () throws -> Int64 in
      Int64(try Sys.fstat(Int32(truncatingIfNeeded: file.handle.rawValue)).st_blocks) * 512
    }
    #expect(box.used == Sandbox.diskUsage(box.backing) + (try held()))
    #expect(box.purgeableFiles == 0, "no longer purgeable: it has no name")
    #expect(try box.read(file, count: 10) == Array(pattern(200_000).prefix(10)))
    #expect(try box.write(file, pattern(100_000), at: 200_000) == 100_000)
    #expect(box.used == Sandbox.diskUsage(box.backing) + (try held()))
    box.release(file)
    try box.expectExactBooks()
    #expect(box.purgeableFiles == 0)
  }

  @Test("hard links: one inode counted once; unlinking one name keeps the bytes, the last gives them back")
  func hardLinks() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/a", pattern(300_000))
    #expect(try box.link("Documents/a", as: "Documents/b") == (try box.lookup("Documents/a")))
    #expect(try box.getattr("Documents/b").st_nlink == 2)
    try box.expectExactBooks()
    try box.unlink("Documents/a")
    try box.expectExactBooks()
    #expect(try box.contents("Documents/b") == pattern(300_000))
    try box.unlink("Documents/b")
    try box.expectExactBooks()
  }

  @Test("hard links stay within a domain: EXDEV across domains, nothing created")
  func linkAcrossDomains() throws {
    let box = try Sandbox()
    try box.writeFile("Library/Caches/a", bytes("a"))
    #expect(throws: Errno.crossDevice) { try box.link("Library/Caches/a", as: "Documents/a") }
    #expect(throws: Errno.crossDevice) { try box.link("Library/Caches/a", as: "tmp/a") }
    #expect(try box.getattr("Library/Caches/a").st_nlink == 1)
    #expect(try box.list("Documents") == [] && box.backingList("tmp") == [])
    try box.expectExactBooks()
  }

  @Test("a file with two links is not renamed (or exchanged) into another domain (EXDEV); the books stay right")
  func linkedFileStays() throws {
    let box = try Sandbox(capacity: 20 << 20)
    try box.writeFile("tmp/a", pattern(200_000))
    try box.writeFile("Documents/other", pattern(100))
    try box.link("tmp/a", as: "tmp/b")
    #expect(throws: Errno.crossDevice) { try box.rename("tmp/b", to: "Documents/b") }
    #expect(throws: Errno.crossDevice) {
      try box.rename("Documents/other", to: "tmp/b", flags: Linux.renameExchange)
    }
    try box.rename("tmp/b", to: "tmp/c")  // within its domain it moves as any file does
    try box.unlink("tmp/a")
    try box.expectExactBooks()
    try box.rename("tmp/c", to: "Documents/c")  // down to one link, it may leave
    try box.unlink("Documents/c")
    try box.expectExactBooks()
  }

  @Test("the books stay right when a linked file's names are removed in turn")
  func removeLinkedNames() throws {
    let box = try Sandbox(capacity: 20 << 20)
    try box.writeFile("tmp/a", pattern(200_000))
    try box.link("tmp/a", as: "tmp/b")
    #expect(throws: Errno.crossDevice) { try box.rename("tmp/b", to: "Documents/b") }
    #expect(throws: Errno.noEntry) { try box.unlink("Documents/b") }
    try box.unlink("tmp/b")
    try box.unlink("tmp/a")
    try box.expectExactBooks()
  }

  @Test("a hard-linked Caches file is not purgeable; a purge of Caches leaves the books equal to du")
  func hardLinkedCacheFile() throws {
    let box = try Sandbox(capacity: 20 << 20)
    try box.writeFile("Library/Caches/a", pattern(1 << 20))
    try box.link("Library/Caches/a", as: "Library/Caches/b")
    #expect(box.purgeableFiles == 0)
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.caches)).files == 0)
    try box.expectExactBooks()
    for name in ["a", "b"] { #expect(try box.contents("Library/Caches/" + name) == pattern(1 << 20)) }
  }

  @Test(
    "a file back to one link is purgeable again (the pattern of link-then-unlink writers such as git)",
    arguments: ["tmp/a", "tmp/b"])
  func purgeableAgain(_ removed: String) throws {
    let box = try Sandbox(capacity: 20 << 20)
    try box.mkdir("tmp/d")
    try box.writeFile("tmp/a", pattern(100_000))
    try box.link("tmp/a", as: "tmp/b")
    #expect(box.purgeableFiles == 0)
    let kept = removed == "tmp/a" ? "tmp/b" : "tmp/a"
    try box.rename(kept, to: "tmp/d/kept")  // the remaining name moves about before the other goes
    try box.unlink(removed)
    #expect(box.purgeableFiles == 1)
    #expect(box.fs.purge(.domain(.tmp)).files == 1)
    #expect(throws: Errno.noEntry) { try box.lookup("tmp/d/kept") }
    try box.expectExactBooks()
  }

  @Test(
    "an attribute that needs a block is charged when set and given back when removed",
    arguments: ["Documents/file", "Documents/directory", "Library/Caches/file"])
  func attributeBlock(_ path: String) throws {
    let box = try Sandbox(capacity: 20 << 20)
    if path.hasSuffix("directory") { try box.mkdir(path) } else { try box.writeFile(path, pattern(5000)) }
    try box.expectExactBooks()
    let before = Sandbox.diskUsage(box.backing)
    try box.setxattr(path, "user.big", bytes: [UInt8](repeating: UInt8(ascii: "x"), count: 600))
    try box.setxattr(path, "com.apple.metadata:com_apple_backup_excludeItem", bytes: pattern(61, seed: 2))
    #expect(Sandbox.diskUsage(box.backing) > before, "the backing filesystem allocated a block for them")
    try box.expectExactBooks()
    if !path.hasSuffix("directory") {
      // A write measures the file again, attribute block included.
      let file = try box.open(path, flags: O_WRONLY)
      #expect(try box.write(file, [1], at: 5000) == 1)
      box.release(file)
    }
    try box.removexattr(path, "user.big")
    try box.removexattr(path, "com.apple.metadata:com_apple_backup_excludeItem")
    try box.expectExactBooks()
  }

  @Test("extended attributes' blocks are charged: 3,000-byte values in a 1M sandbox end in ENOSPC, used == du")
  func attributeBlocksFillTheQuota() throws {
    let box = try Sandbox(capacity: 1 << 20)
    try box.mkdir("Documents/x")
    let value = pattern(3000, seed: 5)
    var refused = 0
    for index in 0..<500 {
      do throws(Errno) {
        box.release(try box.create("Documents/x/f\(index)"))
        try box.setxattr("Documents/x/f\(index)", "user.big", bytes: value)
      } catch {
        #expect(error == .noSpace)
        refused += 1
      }
    }
    #expect(refused > 0, "setxattr past the capacity is ENOSPC")
    try box.expectExactBooks()
    #expect(Sandbox.diskUsage(box.backing) <= 1 << 20)
    let again = try box.remount()
    #expect(again.used == box.used, "a remount's scan counts what the books hold")
    for index in 0..<500 { try? again.removexattr("Documents/x/f\(index)", "user.big") }  // some never got one
    try again.expectExactBooks()
  }

  @Test(
    "AppBox's own attributes reserve nothing: in a full sandbox a class and an urgency are set, a bad value is EINVAL, nothing is purged"
  )
  func ownAttributesInAFullSandbox() throws {
    let box = try Sandbox(capacity: 4 << 20)
    try box.writeFile("Documents/data", pattern(1 << 20))
    try box.makeFile("Library/Caches/c", bytes: 64 * 1024)
    _ = box.fs.resize(to: box.used, reason: .resize)
    #expect(box.free == 0)
    #expect(throws: Errno.invalidArgument) { try box.setxattr("Documents/data", "user.appbox.protection", "bogus") }
    #expect(box.backingHas("Library/Caches/c"), "a refused value purges nothing")
    try box.setxattr("Documents/data", "user.appbox.protection", "complete")
    try box.setxattr("Library/Caches/c", "user.appbox.purge-urgency", "low")
    try box.removexattr("Documents/data", "user.appbox.protection")
    #expect(box.backingHas("Library/Caches/c"), "a short value needs no room, so nothing was purged for it")
    #expect(box.fs.storage.books.withLock { $0.noSpaceRefusals } == 0)
    try box.expectExactBooks()
  }

  @Test("a full sandbox refuses every new allocation with ENOSPC, changing nothing; renames, unlinks, punches go")
  func fullSandbox() throws {
    let box = try Sandbox(capacity: 4 << 20)
    try box.writeFile("Documents/data", pattern(1 << 20))
    try box.writeFile("Documents/other", pattern(8192))
    let open = try box.open("Documents/data", flags: O_RDWR)
    _ = box.fs.resize(to: box.used, reason: .resize)
    #expect(box.free == 0)
    let listing = box.backingList("Documents")
    #expect(throws: Errno.noSpace) { try box.create("Documents/new") }
    #expect(throws: Errno.noSpace) { try box.create("Documents/new", flags: O_RDWR) }
    #expect(throws: Errno.noSpace) { try box.mkdir("Documents/dir") }
    #expect(throws: Errno.noSpace) { try box.symlink("x", at: "Documents/link") }
    #expect(throws: Errno.noSpace) { try box.mknod("Documents/fifo", mode: S_IFIFO | 0o644) }
    #expect(throws: Errno.noSpace) { try box.link("Documents/other", as: "Documents/hard") }
    #expect(throws: Errno.noSpace) { try box.write(open, pattern(4096), at: 1 << 20) }
    #expect(throws: Errno.noSpace) { try box.fallocate(open, offset: 1 << 20, length: 4096) }
    #expect(throws: Errno.noSpace) { try box.setxattr("Documents/other", "user.x", bytes: pattern(3000)) }
    #expect(box.backingList("Documents") == listing, "nothing was created")
    #expect(box.fs.storage.books.withLock { $0.noSpaceRefusals } == 9)
    #expect(try box.write(open, pattern(4096, seed: 9), at: 0) == 4096, "an overwrite needs nothing")
    try box.rename("Documents/other", to: "Documents/renamed")
    try box.truncate(open, to: 512 << 10)
    box.release(open)
    try box.unlink("Documents/renamed")
    #expect(box.free > 0)
    try box.expectExactBooks()
  }

  @Test("a write that partly fits is shortened to what fits; the next is ENOSPC")
  func shortWrite() throws {
    let box = try Sandbox(capacity: 2 << 20)
    let file = try box.create("Documents/f")
    let free = Int(box.free)
    let asked = free + (1 << 20)
    let first = try box.write(file, pattern(asked))
    #expect(first > 0 && first < asked)
    #expect(abs(first - free) <= 2 * 4096, "what was free, less a block for metadata")
    #expect(throws: Errno.noSpace) { try box.write(file, pattern(asked), at: off_t(first)) }
    #expect(box.used <= 2 << 20)
    box.release(file)
    #expect(try box.backingContents("Documents/f") == Array(pattern(asked).prefix(first)))
    try box.expectExactBooks()
  }

  @Test("fsync measures what the backing filesystem allocated at writeback")
  func fsyncMeasures() throws {
    let box = try Sandbox()
    let file = try box.create("tmp/f")
    for index in 0..<64 { _ = try box.write(file, pattern(65_536, seed: UInt64(index)), at: off_t(index * 131_072)) }
    try box.fsync(file)
    try box.expectExactBooks()
    box.release(file)
    try box.expectExactBooks()
  }

  @Test("a remount finds the same books as the running filesystem kept")
  func remountAgrees() throws {
    let box = try Sandbox()
    try box.writeFile("Documents/a", pattern(123_456))
    try box.writeFile("Library/Caches/b", pattern(654_321))
    try box.mkdir("tmp/d")
    try box.writeFile("tmp/d/c", pattern(10_000))
    try box.link("Documents/a", as: "Documents/a2")
    let again = try box.remount()
    #expect(again.usage == box.usage)
    #expect(again.purgeable == box.purgeable)
    #expect(again.purgeableFiles == box.purgeableFiles)
  }
}
