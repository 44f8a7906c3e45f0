import Posix
import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxBackup

#if canImport(Glibc)
  import Glibc
#endif

/// What a restore counts before it writes: what `du` will see of the restored tree.
@Suite("A restore's space estimate")
struct RestoreSpaceTests {
  @Test("extended attributes count: 400 empty files with a 3000-byte attribute each do not fit 1 MiB")
  func attributesCount() throws {
    let scratch = try Scratch()
    let backup = try ForgedBackup(at: scratch("backup"))
    let attribute = (Array("user.big".utf8), pattern(3000, seed: 9))
    for index in 0..<400 { try backup.add("Documents/f\(index)", .file, attributes: [attribute]) }
    try backup.finish()
    #expect {
      try ForgedBackup.restore(scratch("backup"), into: scratch("restored"), capacity: 1 << 20)
    } throws: { ($0 as? BackupError)?.kind == .badData && "\($0)".contains("capacity") }
    #expect(try Scratch.names(scratch.path) == ["backup"])
  }

  /// What `du` counts of a tree: every item's blocks, the root's included.
  static func du(_ root: String) throws -> Int64 {
    var total: Int64 = 0
    var pending = [root]
    while let path = pending.popLast() {
      let status = try Scratch.status(path)
      total += Int64(status.st_blocks) * 512
      if status.st_mode & S_IFMT == S_IFDIR {
        pending += try Scratch.names(path).map { path + "/" + $0 }
      }
    }
    return total
  }

  /// Whether the tests' temporary directories are on ext4, whose layout the estimate
  /// models (docs/reference.md).
  static let scratchIsExt4: Bool = {
    // The type of the mount /tmp lies on: the longest mountpoint that is a prefix of it.
    guard let tmp = try? Sys.realpath("/tmp"), let table = try? Sys.readFile("/proc/self/mountinfo") else {
      return false  // unreadable: not known to be ext4
    }
    var best: (mountpoint: String, type: String) = ("", "")
    for line in table.split(separator: 0x0A) {
      let fields = line.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
      guard fields.count > 6, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { continue }
      let mountpoint = fields[4]
      let covers = mountpoint == "/" || tmp == mountpoint || tmp.hasPrefix(mountpoint + "/")
      if covers, mountpoint.count >= best.mountpoint.count { best = (mountpoint, fields[dash + 1]) }
    }
    return best.type == "ext4"
  }()

  @Test(
    "the estimate is at least what du counts of the restored tree: attributes, a large directory, a fragmented sparse file, long symlinks, links",
    .enabled(if: scratchIsExt4, "the estimate models ext4, and /tmp is another filesystem"))
  func atLeastDu() throws {
    let scratch = try Scratch()
    let backup = try ForgedBackup(at: scratch("backup"))
    let attribute = (Array("user.note".utf8), pattern(2000, seed: 1))
    try backup.add("Documents/tagged", .directory, attributes: [attribute])
    for index in 0..<150 {
      try backup.add("Documents/tagged/f\(index)", .file, bytes: [UInt8(index)], attributes: [attribute])
    }
    try backup.add("Documents/wide", .directory)
    for index in 0..<600 {
      try backup.add("Documents/wide/an-entry-with-a-longer-name-\(index)", .file, bytes: [])
    }
    // 400 runs of 4 KiB, each followed by a 60 KiB hole: an extent tree of two blocks.
    try backup.add("Documents/sparse", .file, bytes: nil, size: 400 << 16)
    let sparse = try Sys.open(backup.contentPath("Documents/sparse"), O_WRONLY | O_CREAT, 0o600)
    for run in 0..<400 {
      _ = try pattern(4096, seed: UInt64(run)).withUnsafeBytes { (b) throws(Errno) in
        try Sys.pwrite(sparse, b, off_t(run << 16))
      }
    }
    try Sys.ftruncate(sparse, off_t(400 << 16))
    Sys.close(sparse)
    for index in 0..<20 {
      try backup.add("Library/l\(index)", .symlink, target: String(repeating: "t", count: 100 + index))
    }
    try backup.add("Library/Preferences/p", .file, bytes: pattern(10_000, seed: 5), protection: 1, inode: 9)
    try backup.add("Library/Preferences/q", .file, bytes: pattern(10_000, seed: 5), protection: 1, inode: 9)
    try backup.finish()
    let summary = try ForgedBackup.restore(scratch("backup"), into: scratch("restored"))
    let counted = try Self.du(scratch("restored"))
    #expect(summary.spaceNeeded >= counted, "estimated \(summary.spaceNeeded), du \(counted)")
    // Not wildly more either: the estimate is what refuses restores.
    #expect(summary.spaceNeeded <= counted * 2 + (64 << 10), "estimated \(summary.spaceNeeded), du \(counted)")
  }

  @Test("blocks of attributes, directories and symlinks, counted as ext4 lays them out")
  func arithmetic() {
    #expect(
      RestoreSpace.attributeBytes([(Array("user.big".utf8), [UInt8](repeating: 0, count: 3000))]) == 16 + 4 + 3000)
    #expect(RestoreSpace.attributeBlocks(88, blockSize: 4096) == 0)
    #expect(RestoreSpace.attributeBlocks(89, blockSize: 4096) == 1)
    #expect(RestoreSpace.attributeBlocks(5000, blockSize: 4096) == 2)
    #expect(RestoreSpace.symlinkBlocks(targetLength: 59) == 0 && RestoreSpace.symlinkBlocks(targetLength: 60) == 1)
    let space = RestoreSpace(blockSize: 4096)
    #expect(space.directoryBlocks(entries: 4000) == 1)
    #expect(space.directoryBlocks(entries: 40_000) == 21)
    #expect(RestoreSpace.entryBytes(Array("a".utf8)) == 12 && RestoreSpace.entryBytes(Array("abcd".utf8)) == 12)
    // The sandbox's seven directories, a block each, before any item.
    #expect(space.total() == (7 * 4096, 7))
    #expect(RestoreSpace.attributeBytes([(Array("user.x".utf8), [])]) == 20)
    #expect(RestoreSpace.attributeBlocks(.max, blockSize: 4096) > 0)
  }
}
