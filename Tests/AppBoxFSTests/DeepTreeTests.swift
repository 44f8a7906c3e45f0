import Posix
import SandboxPolicy
import Synchronization
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// Trees deeper than the daemon's descriptor limit: a program makes one through the mount
/// (a chain of directories renamed into the deepest directory of another), and the walks
/// of the backing tree go through it with a bounded number of descriptors
/// (``DirectoryLevels``).
@Suite("Walks of trees deeper than the descriptor limit")
struct DeepTreeTests {
  /// How deep the chains go: past the index's progress report at 8,192 entries.
  static let depth = 9000

  /// Makes a chain of `depth` directories named `d` below `path`, with a file of `bytes`
  /// bytes at its bottom; returns the allocated bytes of the chain and the file.
  static func chain(below path: String, depth: Int, bytes: Int) throws -> Int64 {
    var fd = try Sys.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    var allocated: Int64 = 0
    for _ in 0..<depth {
      guard mkdirat(fd, "d", 0o755) == 0 else { throw Errno.current }
      let child = try Sys.openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      Sys.close(fd)
      fd = child
      allocated += Int64(try Sys.fstat(fd).st_blocks) * 512
    }
    defer { Sys.close(fd) }
    let file = try Sys.openat(fd, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
    defer { Sys.close(file) }
    let data = [UInt8](repeating: 7, count: bytes)
    guard write(file, data, data.count) == data.count, fsync(file) == 0 else { throw Errno.current }
    return allocated + Int64(try Sys.fstat(file).st_blocks) * 512
  }

  /// How many descriptors this process has open now.
  static func openDescriptors() -> Int {
    guard let directory = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while readdir(directory) != nil { count += 1 }
    return count - 2
  }

  @Test("the mount-time index goes through a tree deeper than the descriptor limit, with few descriptors")
  func indexDeepTree() throws {
    var template = Array("/tmp/appboxfs-deep.XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw Errno.current }
    let base = String(cString: made)
    defer { _ = try? TreeRemoval.remove(Array(base.utf8), in: AT_FDCWD) }  // cleanup: what is left stays in /tmp
    for directory in ["Documents", "Library", "Library/Caches", "tmp"] {
      try Sys.mkdir(base + "/" + directory, 0o755)
    }
    let documents = try Self.chain(below: base + "/Documents", depth: Self.depth, bytes: 10_000)
    let caches = try Self.chain(below: base + "/Library/Caches", depth: 300, bytes: 20_000)
    let root = try Sys.open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { Sys.close(root) }
    let before = Self.openDescriptors()
    let most = Mutex(0)
    let (ledger, catalog) = try BackingScan.run(
      rootFD: root, capacity: 1 << 40,
      progress: { progress in
        guard !progress.isComplete else { return }
        let open = Self.openDescriptors()
        most.withLock { $0 = max($0, open) }
      })
    // Other tests run meanwhile and open descriptors of their own, far fewer than half the depth.
    #expect(most.withLock { $0 } - before < Self.depth / 2, "the walk held one descriptor per level")
    let fixed = { (path: String) throws -> Int64 in
      Int64(try Sys.fstatat(root, path, AT_SYMLINK_NOFOLLOW).st_blocks) * 512
    }
    #expect(ledger.usage(.documents) == documents + (try fixed("Documents")))
    #expect(ledger.usage(.caches) == caches + (try fixed("Library/Caches")))
    #expect(catalog.count == 1)
  }

  /// A temporary directory with a chain of ``depth`` directories below `top` (a file of
  /// 1,000 bytes at its bottom), removed (by ``TreeRemoval``) after `body`.
  static func withChain(_ body: (_ base: String, _ root: Int32) throws -> Void) throws {
    var template = Array("/tmp/appboxfs-deep.XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw Errno.current }
    let base = String(cString: made)
    defer { _ = try? TreeRemoval.remove(Array(base.utf8), in: AT_FDCWD) }  // cleanup: what is left stays in /tmp
    try Sys.mkdir(base + "/top", 0o755)
    _ = try Self.chain(below: base + "/top", depth: Self.depth, bytes: 1000)
    let root = try Sys.open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { Sys.close(root) }
    try body(base, root)
  }

  @Test("a domain move's walk goes through a tree deeper than the descriptor limit, with few descriptors")
  func walkDeepTree() throws {
    try Self.withChain { base, root in
      let top = try Sys.openat(root, "top", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      defer { Sys.close(top) }
      let before = Self.openDescriptors()
      var entries = 0
      var most = 0
      var files = 0
      try SubtreeWalk.run(below: top) { entry in
        entries += 1
        if !entry.isDirectory {
          files += 1
          most = Self.openDescriptors()  // at the bottom of the chain
        }
      }
      #expect(entries == Self.depth + 1)
      #expect(files == 1)
      #expect(most - before < Self.depth / 2, "the walk held one descriptor per level")
    }
  }

  @Test("a container's removal goes through a tree deeper than the descriptor limit, with few descriptors")
  func removeDeepTree() throws {
    try Self.withChain { base, root in
      let before = Self.openDescriptors()
      var most = 0
      var removed: [(components: [[UInt8]], directory: Bool)] = []
      let left = try TreeRemoval.remove(Array("top".utf8), in: root) { components, st in
        if removed.isEmpty { most = Self.openDescriptors() }  // the file at the bottom, first
        removed.append((components, st.st_mode & S_IFMT == S_IFDIR))
      }
      #expect(left == 0)
      #expect(!TestFiles.exists(base + "/top"))
      #expect(removed.count == Self.depth + 2)
      #expect(removed.first.map { !$0.directory && $0.components.count == 4 } == true)
      #expect(removed.last.map { $0.directory && $0.components.isEmpty } == true)
      #expect(most - before < Self.depth / 2, "the removal held one descriptor per level")
    }
  }
}
