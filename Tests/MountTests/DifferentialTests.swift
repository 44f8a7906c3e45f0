// Randomized differential test: the same random operations on the mount (under
// Documents/diff) and on a plain local directory, every result compared.
//
// Environment:
//   APPBOX_DIFF_SEED  the PRNG seed (decimal or 0x-hex; default: a fixed seed, for CI)
//   APPBOX_DIFF_OPS   the number of operations (default 3000)
// The seed and count are printed at the start; a mismatch reports seed, operation index
// and the operation, so `APPBOX_DIFF_SEED=… APPBOX_DIFF_OPS=… swift test --filter
// DifferentialTests` replays it exactly. The sandbox starts UNLOCKED: this compares POSIX
// behaviour, which Data Protection (BFU refuses the default class) would mask.
import CPosixShim
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Differential: mount vs plain directory", .needsFUSE, .timeLimit(.minutes(10)))
struct DifferentialTests {
  static let defaultSeed: UInt64 = 0xA9B0_C0DE_2024_0001
  static let defaultCount = 3000

  @Test("random POSIX operations agree with a local directory, step by step and in the end")
  func randomOperations() throws {
    let environment = ProcessInfo.processInfo.environment
    let seed = environment["APPBOX_DIFF_SEED"].flatMap(Self.parseSeed) ?? Self.defaultSeed
    let count = environment["APPBOX_DIFF_OPS"].flatMap { Int($0) } ?? Self.defaultCount
    print("DifferentialTests: seed \(seed) (0x\(String(seed, radix: 16))), \(count) operations")

    let fixture = try MountFixture(arguments: ["--unlocked"])
    let mountRoot = fixture.path("Documents/diff")
    let localRoot = fixture.root + "/diff-local"
    #expect(mkdir(mountRoot, 0o755) == 0 && mkdir(localRoot, 0o755) == 0)

    var generator = OperationGenerator(seed: seed)
    var local = DifferentialSide(root: localRoot)
    var mounted = DifferentialSide(root: mountRoot)
    let started = Date()
    var failed = false
    var tally: [String: (ok: Int, failed: Int)] = [:]
    var tree = local.tree()
    for index in 0..<count {
      let operation = generator.next(openSlots: local.openSlots, tree: tree)
      let expected = local.apply(operation)
      let actual = mounted.apply(operation)
      if operation.changesNamespace { tree = local.tree() }
      let kind = String(operation.description.prefix { $0.isLetter || $0 == " " }.split(separator: " ").first ?? "")
      if expected.error == 0 { tally[kind, default: (0, 0)].ok += 1 } else { tally[kind, default: (0, 0)].failed += 1 }
      if expected != actual {
        Issue.record(
          """
          seed \(seed) (APPBOX_DIFF_SEED=\(seed) APPBOX_DIFF_OPS=\(index + 1)), operation #\(index): \(operation)
            local: \(expected)
            mount: \(actual)\(DiffOutcome.dataDifference(expected, actual))
          """)
        failed = true
        break
      }
    }
    local.closeAll()
    mounted.closeAll()
    // Coverage, so a generator that stopped exercising something shows: ok/errno per kind.
    print(
      "DifferentialTests: "
        + tally.keys.sorted().map { "\($0) \(tally[$0]!.ok)/\(tally[$0]!.failed)" }.joined(separator: ", "))
    print(
      "DifferentialTests: \(count) operations in \(String(format: "%.1f", Date().timeIntervalSince(started))) s\(failed ? " (stopped at the first mismatch)" : "")"
    )

    if !failed {
      // The final trees, byte for byte: names, types, contents, modes, nlink, hard-link
      // groups, xattrs; the backing tree too (minus AppBox's own attributes).
      let problems = try TreeComparison().differences(localRoot, mountRoot)
      #expect(problems.isEmpty, "seed \(seed): final trees differ:\n\(problems.joined(separator: "\n"))")
      var backing = TreeComparison()
      backing.xattrFilter = { !XattrNames.isAppBoxInternal($0) }
      let backingProblems = try backing.differences(localRoot, fixture.backingPath("Documents/diff"))
      #expect(
        backingProblems.isEmpty, "seed \(seed): backing tree differs:\n\(backingProblems.joined(separator: "\n"))")
    }
    try fixture.unmount()
  }

  static func parseSeed(_ text: String) -> UInt64? {
    text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
  }
}

enum XattrNames {
  static func isAppBoxInternal(_ name: [UInt8]) -> Bool { name.starts(with: Array("user.appbox.".utf8)) }
}

// MARK: - Operations

/// One operation, with everything needed to replay it on either side.
enum Operation: CustomStringConvertible {
  case open(path: String, flags: Int32, mode: mode_t, slot: Int)
  case close(slot: Int)
  case pwrite(slot: Int, offset: Int, data: [UInt8])
  case pread(slot: Int, offset: Int, count: Int)
  case ftruncate(slot: Int, length: Int)
  case fallocate(slot: Int, mode: Int32, offset: Int, length: Int)
  case fstat(slot: Int)
  case fsync(slot: Int)
  case writeFile(path: String, offset: Int, data: [UInt8])
  case readFile(path: String)
  case truncate(path: String, length: Int)
  case rename(from: String, to: String, flags: UInt32)
  case link(from: String, to: String)
  case unlink(path: String)
  case mkdir(path: String, mode: mode_t)
  case rmdir(path: String)
  case symlink(target: String, path: String)
  case readlink(path: String)
  case chmod(path: String, mode: mode_t)
  case setxattr(path: String, name: String, value: [UInt8], flags: Int32)
  case getxattr(path: String, name: String, size: Int)
  case removexattr(path: String, name: String)
  case listxattr(path: String)
  case stat(path: String, follow: Bool)
  case readdir(path: String)

  /// Whether the operation may add, remove or retype entries.
  var changesNamespace: Bool {
    switch self {
    case .open, .writeFile, .rename, .link, .unlink, .mkdir, .rmdir, .symlink: return true
    default: return false
    }
  }

  var description: String {
    switch self {
    case .open(let path, let flags, let mode, let slot):
      return "open(\"\(path)\", \(Self.describe(flags: flags)), 0o\(String(mode, radix: 8))) → slot \(slot)"
    case .close(let slot): return "close(slot \(slot))"
    case .pwrite(let slot, let offset, let data): return "pwrite(slot \(slot), \(data.count) bytes, offset \(offset))"
    case .pread(let slot, let offset, let count): return "pread(slot \(slot), \(count) bytes, offset \(offset))"
    case .ftruncate(let slot, let length): return "ftruncate(slot \(slot), \(length))"
    case .fallocate(let slot, let mode, let offset, let length):
      return "fallocate(slot \(slot), mode \(mode), offset \(offset), length \(length))"
    case .fstat(let slot): return "fstat(slot \(slot))"
    case .fsync(let slot): return "fsync(slot \(slot))"
    case .writeFile(let path, let offset, let data):
      return "write \(data.count) bytes at \(offset) to \"\(path)\" (open O_WRONLY|O_CREAT 0o644, pwrite, close)"
    case .readFile(let path): return "read \"\(path)\" whole (open O_RDONLY, read, close)"
    case .truncate(let path, let length): return "truncate(\"\(path)\", \(length))"
    case .rename(let from, let to, let flags):
      let name = flags == 0 ? "" : flags == cposix_rename_noreplace() ? ", RENAME_NOREPLACE" : ", RENAME_EXCHANGE"
      return "renameat2(\"\(from)\", \"\(to)\"\(name))"
    case .link(let from, let to): return "link(\"\(from)\", \"\(to)\")"
    case .unlink(let path): return "unlink(\"\(path)\")"
    case .mkdir(let path, let mode): return "mkdir(\"\(path)\", 0o\(String(mode, radix: 8)))"
    case .rmdir(let path): return "rmdir(\"\(path)\")"
    case .symlink(let target, let path): return "symlink(\"\(target)\", \"\(path)\")"
    case .readlink(let path): return "readlink(\"\(path)\")"
    case .chmod(let path, let mode): return "chmod(\"\(path)\", 0o\(String(mode, radix: 8)))"
    case .setxattr(let path, let name, let value, let flags):
      return "setxattr(\"\(path)\", \"\(name)\", \(value.count) bytes, flags \(flags))"
    case .getxattr(let path, let name, let size): return "getxattr(\"\(path)\", \"\(name)\", size \(size))"
    case .removexattr(let path, let name): return "removexattr(\"\(path)\", \"\(name)\")"
    case .listxattr(let path): return "listxattr(\"\(path)\")"
    case .stat(let path, let follow): return "\(follow ? "stat" : "lstat")(\"\(path)\")"
    case .readdir(let path): return "readdir(\"\(path)\")"
    }
  }

  static func describe(flags: Int32) -> String {
    var parts = [flags & O_ACCMODE == O_RDONLY ? "O_RDONLY" : flags & O_ACCMODE == O_WRONLY ? "O_WRONLY" : "O_RDWR"]
    for (flag, name) in [
      (O_CREAT, "O_CREAT"), (O_EXCL, "O_EXCL"), (O_TRUNC, "O_TRUNC"), (O_APPEND, "O_APPEND"),
      (cposix_o_directory(), "O_DIRECTORY"), (cposix_o_nofollow(), "O_NOFOLLOW"),
    ] where flags & flag != 0 {
      parts.append(name)
    }
    return parts.joined(separator: "|")
  }
}

/// Draws operations over a small namespace (four names, three levels), so that names
/// collide all the time: files over directories, renames into subdirectories, links to
/// symlinks, operations through dangling links.
struct OperationGenerator {
  static let slotCount = 4
  static let names = ["a", "b", "c", "d"]
  static let xattrNames = ["user.a", "user.b", "user.longer.name"]
  static let modes: [mode_t] = [0o644, 0o600, 0o755, 0o444, 0o700, 0o640, 0o4755, 0o2775, 0o1777]
  /// Relative targets stay inside the tree; the absolute one resolves outside it, the same
  /// for both sides, to a place where nothing can be created.
  static let symlinkTargets = ["a", "b", "a/b", "c/d", ".", "missing", "/proc/appbox-nonexistent/target", "b/../c"]

  var random: SeededGenerator

  init(seed: UInt64) { random = SeededGenerator(seed: seed) }

  /// What exists now (read from the local side, which the mount matches so far), so
  /// that operations hit existing entries often instead of failing with ENOENT/ENOTDIR.
  private var tree = LocalTree()

  /// Mostly an existing non-directory, for file operations.
  mutating func filePath() -> String {
    random.chance(50) && !tree.files.isEmpty ? random.pick(tree.files) : path()
  }

  /// Mostly an existing directory (never the root of the tree).
  mutating func directoryPath() -> String {
    random.chance(60) && !tree.directories.isEmpty ? random.pick(tree.directories) : path()
  }

  /// A path: an existing entry, a new name in an existing directory, or any name.
  mutating func path() -> String {
    switch random.below(10) {
    case 0..<4 where !tree.entries.isEmpty: return random.pick(tree.entries)
    case 4..<7:
      let parent = random.pick([""] + tree.directories)
      let name = random.pick(Self.names)
      return parent.isEmpty ? name : parent + "/" + name
    default:
      let depth = random.pick([1, 1, 1, 2, 2, 2, 3])
      return (0..<depth).map { _ in random.pick(Self.names) }.joined(separator: "/")
    }
  }

  mutating func offset() -> Int {
    switch random.below(10) {
    case 0..<5: return random.below(4096)
    case 5..<8: return random.below(140_000)
    case 8: return random.pick([4095, 4096, 65535, 65536, 131_072])
    default: return random.below(1_100_000)  // far beyond EOF: sparse
    }
  }

  mutating func length() -> Int {
    switch random.below(10) {
    case 0: return 0
    case 1..<7: return random.inRange(1...4096)
    case 7..<9: return random.inRange(4097...70_000)
    default: return random.inRange(70_001...200_000)
    }
  }

  mutating func next(openSlots: Set<Int>, tree: LocalTree) -> Operation {
    self.tree = tree
    let slot = openSlots.isEmpty ? nil : openSlots.sorted()[random.below(openSlots.count)]
    let choice = random.below(100)
    if let slot, choice < 28 {
      switch random.below(20) {
      case 0..<7: return .pwrite(slot: slot, offset: offset(), data: random.bytes(length()))
      case 7..<12: return .pread(slot: slot, offset: offset(), count: length())
      case 12..<14: return .ftruncate(slot: slot, length: random.pick([0, random.below(5000), random.below(300_000)]))
      case 14:
        return .fallocate(
          slot: slot, mode: random.chance(50) ? 0 : cposix_falloc_keep_size(), offset: offset(),
          length: random.inRange(1...100_000))
      case 15..<17: return .fstat(slot: slot)
      case 17: return .fsync(slot: slot)
      default: return .close(slot: slot)
      }
    }
    switch choice {
    case 28..<36:
      let flags = random.pick([
        O_RDWR | O_CREAT, O_RDWR | O_CREAT | O_EXCL, O_RDWR | O_TRUNC, O_RDONLY, O_WRONLY | O_CREAT | O_APPEND,
        O_RDONLY | cposix_o_directory(), O_RDWR, O_WRONLY | O_CREAT | O_TRUNC, O_RDWR | cposix_o_nofollow(),
      ])
      return .open(path: filePath(), flags: flags, mode: random.pick(Self.modes), slot: random.below(Self.slotCount))
    case 36..<44: return .writeFile(path: filePath(), offset: offset(), data: random.bytes(length()))
    case 44..<48: return .readFile(path: filePath())
    case 48..<51:
      return .truncate(path: filePath(), length: random.pick([0, random.below(5000), random.below(300_000)]))
    case 51..<59:
      let from = path()
      let to = random.chance(20) ? from + "/" + random.pick(Self.names) : path()
      let flags = random.pick([0, 0, 0, 0, 0, cposix_rename_noreplace(), cposix_rename_exchange()])
      return .rename(from: from, to: to, flags: flags)
    case 59..<62: return .link(from: filePath(), to: path())
    case 62..<66: return .unlink(path: filePath())
    case 66..<70: return .mkdir(path: path(), mode: random.pick([0o755, 0o700, 0o2775, 0o1777, 0o750]))
    case 70..<75: return .rmdir(path: directoryPath())
    case 75..<78: return .symlink(target: random.pick(Self.symlinkTargets), path: path())
    case 78..<79: return .readlink(path: filePath())
    case 79..<82: return .chmod(path: path(), mode: random.pick(Self.modes))
    case 82..<86:
      let value = random.chance(10) ? [] : random.bytes(random.inRange(1...300))
      return .setxattr(path: path(), name: random.pick(Self.xattrNames), value: value, flags: Int32(random.below(3)))
    case 86..<88: return .getxattr(path: path(), name: random.pick(Self.xattrNames), size: random.pick([0, 4, 65536]))
    case 88..<89: return .removexattr(path: path(), name: random.pick(Self.xattrNames))
    case 89..<90: return .listxattr(path: path())
    case 90..<97: return .stat(path: path(), follow: random.chance(40))
    default: return .readdir(path: random.chance(15) ? "" : path())
    }
  }
}

/// The entries of the local tree, by relative path (at most three levels, the
/// generator's namespace).
struct LocalTree {
  var entries: [String] = []
  var directories: [String] = []
  /// Entries that are not directories.
  var files: [String] = []
}

// MARK: - Applying and comparing

/// What one operation did on one side: its result or errno, what it read, and the
/// state (`lstat`) of the paths it touched, afterwards.
struct DiffOutcome: Equatable, CustomStringConvertible {
  var result = 0
  var error: Int32 = 0
  var data: [UInt8]?
  var summary: String?
  var after: [String] = []

  var description: String {
    var parts = [error == 0 ? "→ \(result)" : "→ -1 \(Self.errnoName(error))"]
    if let data { parts.append("data \(data.count) bytes, fnv \(String(Self.fnv(data), radix: 16))") }
    if let summary { parts.append(summary) }
    if !after.isEmpty { parts.append("after: " + after.joined(separator: "; ")) }
    return parts.joined(separator: ", ")
  }

  static func errnoName(_ code: Int32) -> String {
    let names: [Int32: String] = [
      EPERM: "EPERM", ENOENT: "ENOENT", EIO: "EIO", EBADF: "EBADF", EACCES: "EACCES", EBUSY: "EBUSY", EEXIST: "EEXIST",
      EXDEV: "EXDEV", ENOTDIR: "ENOTDIR", EISDIR: "EISDIR", EINVAL: "EINVAL", EFBIG: "EFBIG", ENOSPC: "ENOSPC",
      EMLINK: "EMLINK", ERANGE: "ERANGE", ENAMETOOLONG: "ENAMETOOLONG", ENOSYS: "ENOSYS", ENOTEMPTY: "ENOTEMPTY",
      ELOOP: "ELOOP", ENODATA: "ENODATA", EOPNOTSUPP: "EOPNOTSUPP", E2BIG: "E2BIG",
    ]
    return names[code] ?? "errno \(code)"
  }

  static func fnv(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    return hash
  }

  /// Where two read results first differ, for the failure message.
  static func dataDifference(_ a: DiffOutcome, _ b: DiffOutcome) -> String {
    guard let x = a.data, let y = b.data, x != y else { return "" }
    let index = zip(x, y).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(x.count, y.count)
    return "\n  read data first differs at byte \(index) (local \(x.count) bytes, mount \(y.count) bytes)"
  }
}

/// One side of the comparison: a root directory and the open handles in their slots.
struct DifferentialSide {
  let root: String
  var slots = [Int32](repeating: -1, count: OperationGenerator.slotCount)

  init(root: String) { self.root = root }

  var openSlots: Set<Int> { Set(slots.indices.filter { slots[$0] >= 0 }) }

  func full(_ path: String) -> String { path.isEmpty ? root : root + "/" + path }

  /// The tree's entries and directories (not following symlinks), three levels deep.
  func tree() -> LocalTree {
    var result = LocalTree()
    func visit(_ relative: String, depth: Int) {
      guard depth < 3, let names = try? TreeComparison.names(in: TreePath(full(relative))) else { return }
      for name in names {
        let path = (relative.isEmpty ? "" : relative + "/") + TreePath(name).description
        result.entries.append(path)
        var info = Glibc.stat()
        if lstat(full(path), &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
          result.directories.append(path)
          visit(path, depth: depth + 1)
        } else {
          result.files.append(path)
        }
      }
    }
    visit("", depth: 0)
    return result
  }

  mutating func closeAll() {
    for index in slots.indices where slots[index] >= 0 {
      close(slots[index])
      slots[index] = -1
    }
  }

  mutating func apply(_ operation: Operation) -> DiffOutcome {
    var outcome = DiffOutcome()
    func record(_ value: Int) {
      outcome.result = value < 0 ? -1 : value
      outcome.error = value < 0 ? errno : 0
    }
    switch operation {
    case .open(let path, let flags, let mode, let slot):
      if slots[slot] >= 0 {
        close(slots[slot])
        slots[slot] = -1
      }
      let fd = open(full(path), flags | O_CLOEXEC, mode)
      record(Int(fd))
      if fd >= 0 {
        slots[slot] = fd
        outcome.result = 0  // descriptor numbers differ between the sides
        outcome.summary = describe(fd: fd)
      }
      outcome.after = [state(path)]
    case .close(let slot):
      record(Int(close(slots[slot])))
      slots[slot] = -1
    case .pwrite(let slot, let offset, let data):
      record(data.withUnsafeBytes { pwrite(slots[slot], $0.baseAddress, $0.count, off_t(offset)) })
      outcome.summary = describe(fd: slots[slot])
    case .pread(let slot, let offset, let count):
      var buffer = [UInt8](repeating: 0, count: count)
      let read = buffer.withUnsafeMutableBytes { pread(slots[slot], $0.baseAddress, $0.count, off_t(offset)) }
      record(read)
      if read >= 0 { outcome.data = Array(buffer[..<read]) }
    case .ftruncate(let slot, let length):
      record(Int(Glibc.ftruncate(slots[slot], off_t(length))))
      outcome.summary = describe(fd: slots[slot])
    case .fallocate(let slot, let mode, let offset, let length):
      record(Int(cposix_fallocate(slots[slot], mode, off_t(offset), off_t(length))))
      outcome.summary = describe(fd: slots[slot])
    case .fstat(let slot):
      outcome.summary = describe(fd: slots[slot])
    case .fsync(let slot):
      record(Int(Glibc.fsync(slots[slot])))
    case .writeFile(let path, let offset, let data):
      let fd = open(full(path), O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
      if fd < 0 {
        record(Int(fd))
      } else {
        record(data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) })
        close(fd)
      }
      outcome.after = [state(path)]
    case .readFile(let path):
      let fd = open(full(path), O_RDONLY | O_CLOEXEC)
      if fd < 0 {
        record(Int(fd))
      } else {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
          let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
          if count <= 0 {
            record(count)
            break
          }
          data += buffer[..<count]
        }
        outcome.data = data
        close(fd)
      }
    case .truncate(let path, let length):
      record(Int(Glibc.truncate(full(path), off_t(length))))
      outcome.after = [state(path)]
    case .rename(let from, let to, let flags):
      record(Int(cposix_renameat2(AT_FDCWD, full(from), AT_FDCWD, full(to), flags)))
      outcome.after = [state(from), state(to)]
    case .link(let from, let to):
      record(Int(Glibc.link(full(from), full(to))))
      outcome.after = [state(from), state(to)]
    case .unlink(let path):
      record(Int(Glibc.unlink(full(path))))
      outcome.after = [state(path)]
    case .mkdir(let path, let mode):
      record(Int(Glibc.mkdir(full(path), mode)))
      outcome.after = [state(path)]
    case .rmdir(let path):
      record(Int(Glibc.rmdir(full(path))))
      outcome.after = [state(path)]
    case .symlink(let target, let path):
      record(Int(Glibc.symlink(target, full(path))))
      outcome.after = [state(path)]
    case .readlink(let path):
      var buffer = [UInt8](repeating: 0, count: 4096)
      let count = buffer.withUnsafeMutableBytes {
        Glibc.readlink(full(path), $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count)
      }
      record(count)
      if count >= 0 { outcome.data = Array(buffer[..<count]) }
    case .chmod(let path, let mode):
      record(Int(Glibc.chmod(full(path), mode)))
      outcome.after = [state(path)]
    case .setxattr(let path, let name, let value, let flags):
      record(Int(value.withUnsafeBytes { cposix_setxattr(full(path), name, $0.baseAddress, $0.count, flags) }))
      outcome.after = [state(path)]
    case .getxattr(let path, let name, let size):
      var buffer = [UInt8](repeating: 0, count: max(size, 1))
      let count = buffer.withUnsafeMutableBytes {
        cposix_getxattr(full(path), name, size == 0 ? nil : $0.baseAddress, size)
      }
      record(count)
      if count >= 0, size > 0 { outcome.data = Array(buffer[..<count]) }
    case .removexattr(let path, let name):
      record(Int(cposix_removexattr(full(path), name)))
      outcome.after = [state(path)]
    case .listxattr(let path):
      var buffer = [UInt8](repeating: 0, count: 65536)
      let count = buffer.withUnsafeMutableBytes {
        cposix_listxattr(full(path), $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count)
      }
      record(count)
      if count >= 0 {
        let names = buffer[..<count].split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.sorted()
        outcome.summary = "names \(names)"
      }
    case .stat(let path, let follow):
      var info = Glibc.stat()
      record(Int(follow ? stat(full(path), &info) : lstat(full(path), &info)))
      if outcome.error == 0 { outcome.summary = Self.describe(info) }
    case .readdir(let path):
      do {
        let names = try TreeComparison.names(in: TreePath(full(path))).map { TreePath($0).description }
        outcome.summary = "entries \(names)"
      } catch {
        outcome.result = -1
        outcome.error = errno
      }
    }
    return outcome
  }

  /// `lstat` of a path, as the fields both sides must agree on.
  func state(_ path: String) -> String {
    var info = Glibc.stat()
    guard lstat(full(path), &info) == 0 else { return "\(path): \(DiffOutcome.errnoName(errno))" }
    return "\(path): \(Self.describe(info))"
  }

  func describe(fd: Int32) -> String {
    var info = Glibc.stat()
    guard fstat(fd, &info) == 0 else { return "fstat: \(DiffOutcome.errnoName(errno))" }
    return "fstat " + Self.describe(info)
  }

  /// Type, permission bits, size (not for directories, whose size is the backing
  /// filesystem's business) and link count.
  static func describe(_ info: Glibc.stat) -> String {
    let type = info.st_mode & S_IFMT
    let kind = type == S_IFREG ? "file" : type == S_IFDIR ? "dir" : type == S_IFLNK ? "symlink" : "other"
    let size = type == S_IFDIR ? "" : " size \(info.st_size)"
    return "\(kind) 0o\(String(info.st_mode & 0o7777, radix: 8))\(size) nlink \(info.st_nlink)"
  }
}
