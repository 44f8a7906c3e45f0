import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A `SandboxFilesystem` over a fresh temporary backing directory, driven through its
/// protocol as the FUSE bridge would drive it, with paths for names.
final class Sandbox {
  /// The backing directory.
  let backing: String
  /// The event log (JSON Lines).
  let eventsPath: String
  let options: SandboxOptions
  let fs: SandboxFilesystem
  let notifier = RecordingNotifier()

  /// root, as most requests in the tests come.
  static var root: Caller { Caller(uid: 0, gid: 0, pid: getpid(), umask: 0o022) }

  init(capacity: Int64 = 64 << 20, _ configure: (inout SandboxOptions) -> Void = { _ in }) throws {
    var template = Array("/tmp/appboxfs-test.XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw Errno.current }
    let base = String(cString: made)
    backing = base + "/backing"
    eventsPath = base + "/events.jsonl"
    try Sys.mkdir(backing, 0o755)
    var options = SandboxOptions()
    options.capacity = capacity
    options.gracePeriod = 0
    options.eventsPath = eventsPath
    configure(&options)
    self.options = options
    fs = try SandboxFilesystem(
      backingDirectory: backing, configuration: CacheTimeouts(), options: options, driver: InMemoryDriver())
    fs.mounted(notifier: notifier)
  }

  deinit {
    TestFiles.removeTree(String(backing.dropLast("/backing".count)))
  }

  // MARK: Requests by path

  /// The node of `path` (one more lookup on each component). A negative entry (node 0,
  /// which the kernel would cache) is ENOENT here.
  func lookup(_ path: String) throws(Errno) -> NodeID {
    var node = NodeID.root
    for component in path.split(separator: "/") {
      node = try FileName.withBytes(Array(component.utf8)) { (name) throws(Errno) -> NodeID in
        try fs.lookup(Self.root, parent: node, name: name).node
      }
      if node.rawValue == 0 { throw .noEntry }
    }
    return node
  }

  /// The parent's node and the last component of `path`.
  func parent(of path: String) throws(Errno) -> (NodeID, [UInt8]) {
    let components = path.split(separator: "/")
    let parent = try lookup(components.dropLast().joined(separator: "/"))
    return (parent, Array(components.last!.utf8))
  }

  /// `create` of a new file open for reading and writing.
  func create(_ path: String, as caller: Caller = root, mode: mode_t = 0o644, flags: Int32 = O_RDWR | O_EXCL)
    throws(Errno) -> (node: NodeID, handle: FileHandle)
  {
    let (parent, name) = try parent(of: path)
    let (entry, opened) = try FileName.withBytes(name) { (name) throws(Errno) in
      try fs.create(caller, parent: parent, name: name, mode: mode, flags: flags)
    }
    return (entry.node, opened.handle)
  }

  /// `open` of an existing file.
  func open(_ path: String, flags: Int32 = O_RDONLY) throws(Errno) -> (node: NodeID, handle: FileHandle) {
    let node = try lookup(path)
    return (node, try fs.open(Self.root, node: node, flags: flags).handle)
  }

  /// `write` of `bytes` at `offset`: the bytes written.
  func write(_ file: (node: NodeID, handle: FileHandle), _ bytes: [UInt8], at offset: off_t = 0) throws(Errno) -> Int {
    try fs.write(Self.root, node: file.node, handle: file.handle, data: ByteWriteData(bytes: bytes), offset: offset)
      .count
  }

  /// `read` of up to `count` bytes at `offset`, as the bridge would splice them.
  func read(_ file: (node: NodeID, handle: FileHandle), count: Int, at offset: off_t = 0) throws(Errno) -> [UInt8] {
    switch try fs.read(Self.root, node: file.node, handle: file.handle, count: count, offset: offset) {
    case .file(let fd, let from, let count):
      var buffer = [UInt8](repeating: 0, count: count)
      let got = try buffer.withUnsafeMutableBytes { raw in Result { () throws(Errno) in try Sys.pread(fd, raw, from) } }
        .get()
      return Array(buffer[..<got])
    }
  }

  /// `release` of an open file.
  func release(_ file: (node: NodeID, handle: FileHandle)) {
    fs.release(Self.root, node: file.node, handle: file.handle)
  }

  /// Writes a whole file and closes it.
  func makeFile(_ path: String, bytes count: Int) throws(Errno) {
    let file = try create(path)
    defer { release(file) }
    _ = try write(file, [UInt8](repeating: 0x61, count: count))
  }

  func mkdir(_ path: String, mode: mode_t = 0o755) throws(Errno) -> NodeID {
    let (parent, name) = try parent(of: path)
    return try FileName.withBytes(name) { (name) throws(Errno) in
      try fs.mkdir(Self.root, parent: parent, name: name, mode: mode).node
    }
  }

  func unlink(_ path: String) throws(Errno) {
    let (parent, name) = try parent(of: path)
    try FileName.withBytes(name) { (name) throws(Errno) in try fs.unlink(Self.root, parent: parent, name: name) }
  }

  func rename(_ path: String, to newPath: String) throws(Errno) {
    let (from, name) = try parent(of: path)
    let (to, newName) = try parent(of: newPath)
    try FileName.withBytes(name) { (name) throws(Errno) in
      try FileName.withBytes(newName) { (newName) throws(Errno) in
        try fs.rename(Self.root, parent: from, name: name, newParent: to, newName: newName, flags: 0)
      }
    }
  }

  func setxattr(_ path: String, _ name: String, _ value: String) throws(Errno) {
    let node = try lookup(path)
    try FileName.withBytes(Array(name.utf8)) { (name) throws(Errno) in
      try Array(value.utf8).withUnsafeBytes { bytes in
        Result { () throws(Errno) in try fs.setxattr(Self.root, node: node, name: name, value: bytes, flags: 0) }
      }.get()
    }
  }

  /// The names `readdir` lists in `path`, without `.` and `..`.
  func list(_ path: String) throws(Errno) -> [String] {
    let node = try lookup(path)
    let handle = try fs.opendir(Self.root, node: node, flags: O_RDONLY).handle
    defer { fs.releasedir(Self.root, node: node, handle: handle) }
    var filler = ListFiller(plus: false)
    try fs.readdir(Self.root, node: node, handle: handle, offset: 0, filler: &filler)
    return filler.names.map { String(decoding: $0, as: UTF8.self) }.filter { $0 != "." && $0 != ".." }.sorted()
  }

  /// Whether `path` exists on the backing directory itself.
  func backingHas(_ path: String) -> Bool {
    (try? Sys.lstatPath(backing + "/" + path)) != nil
  }

  // MARK: The books

  /// Usage by domain as the daemon's ledger holds it.
  var usage: [StorageDomain: Int64] {
    fs.storage.books.withLock { books in
      Dictionary(uniqueKeysWithValues: StorageDomain.allCases.map { ($0, books.ledger.usage($0)) })
    }
  }

  /// Bytes in use, by the ledger.
  var used: Int64 { fs.storage.books.withLock { $0.ledger.used } }

  /// Purgeable bytes by domain, by the catalog.
  var purgeable: [StorageDomain: Int64] {
    fs.storage.books.withLock { books in
      Dictionary(uniqueKeysWithValues: StorageDomain.purgeOrder.map { ($0, books.catalog.purgeableBytes(domain: $0)) })
    }
  }

  /// Expects the books to be exact: usage by domain and purgeable bytes as a fresh
  /// mount-time scan of the backing tree finds them, and the total as `du` counts the
  /// tree (allocated blocks, hard links once), with nothing in flight.
  func expectExactBooks(sourceLocation: SourceLocation = #_sourceLocation) throws {
    let rescan = try SandboxFilesystem(
      backingDirectory: backing, configuration: CacheTimeouts(), options: options, driver: InMemoryDriver())
    let fresh = Sandbox.books(of: rescan)
    #expect(usage == fresh.usage, "usage by domain", sourceLocation: sourceLocation)
    #expect(purgeable == fresh.purgeable, "purgeable bytes", sourceLocation: sourceLocation)
    #expect(used == Self.diskUsage(backing), "used against du", sourceLocation: sourceLocation)
    #expect(fs.storage.books.withLock { $0.inFlight.isEmpty }, sourceLocation: sourceLocation)
  }

  private static func books(of fs: SandboxFilesystem) -> (
    usage: [StorageDomain: Int64], purgeable: [StorageDomain: Int64]
  ) {
    fs.storage.books.withLock { books in
      (
        Dictionary(uniqueKeysWithValues: StorageDomain.allCases.map { ($0, books.ledger.usage($0)) }),
        Dictionary(
          uniqueKeysWithValues: StorageDomain.purgeOrder.map { ($0, books.catalog.purgeableBytes(domain: $0)) })
      )
    }
  }

  /// Allocated bytes under `path` as `du` counts them (hard links once).
  static func diskUsage(_ path: String) -> Int64 {
    var seen = Set<UInt64>()
    var total: Int64 = 0
    var stack = [path]
    while let next = stack.popLast() {
      guard let st = try? Sys.lstatPath(next) else { continue }
      if st.st_nlink > 1 && st.st_mode & S_IFMT != S_IFDIR && !seen.insert(UInt64(st.st_ino)).inserted { continue }
      total += Int64(st.st_blocks) * 512
      if st.st_mode & S_IFMT == S_IFDIR { stack += TestFiles.entries(of: next).map { next + "/" + $0 } }
    }
    return total
  }

  // MARK: Events

  /// The event log's lines of `kind` (`"type":"purge"` and the like).
  func events(_ kind: String) -> [String] {
    fs.events.flush()
    guard let text = TestFiles.text(of: eventsPath) else { return [] }
    return text.split(separator: "\n").map(String.init).filter { $0.contains("\"type\":\"\(kind)\"") }
  }

  /// Waits up to five seconds for `condition` (notifications are sent from the
  /// maintenance queue).
  func eventually(_ condition: () -> Bool) -> Bool {
    let deadline = Clock.monotonic() + 5
    while !condition() {
      if Clock.monotonic() > deadline { return false }
      Clock.sleep(seconds: 0.01)
    }
    return true
  }
}
