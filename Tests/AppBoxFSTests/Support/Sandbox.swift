import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A temporary directory holding a backing directory and an event log, removed when the
/// last sandbox over it goes.
final class SandboxRoot: Sendable {
  let base: String
  var backing: String { base + "/backing" }
  /// Whether the backing directory is a tmpfs of its own.
  let onTmpfs: Bool

  /// A new temporary directory; with `tmpfs` (mount options such as `size=16m`), its
  /// backing directory is a tmpfs of its own (root only): a small filesystem that fills
  /// up, or one that gives file handles where `/tmp` (a container's overlay) does not.
  init(tmpfs: String? = nil) throws {
    var template = Array("/tmp/appboxfs-test.XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw Errno.current }
    base = String(cString: made)
    try Sys.mkdir(base + "/backing", 0o755)
    onTmpfs = tmpfs != nil
    if let tmpfs, mount("appboxfs-test", base + "/backing", "tmpfs", 0, "mode=0755," + tmpfs) != 0 {
      let error = Errno.current
      TestFiles.removeTree(base)
      throw error
    }
  }

  deinit {
    if onTmpfs { _ = umount2(backing, Int32(MNT_DETACH)) }
    TestFiles.removeTree(base)
  }
}

/// A `SandboxFilesystem` over a fresh temporary backing directory, driven through its
/// protocol as the FUSE bridge would drive it, with paths for names.
final class Sandbox: Sendable {
  /// Where the backing directory and the event log live.
  let temporary: SandboxRoot
  /// The backing directory.
  var backing: String { temporary.backing }
  /// The event log (JSON Lines).
  let eventsPath: String
  let options: SandboxOptions
  let fs: SandboxFilesystem
  let notifier = RecordingNotifier()
  let driver: InMemoryDriver

  /// root, as most requests in the tests come.
  static var root: Caller { Caller(uid: 0, gid: 0, pid: getpid(), umask: 0o022) }

  /// Another user (`nobody`), for what depends on who asks.
  static var nobody: Caller { Caller(uid: 65534, gid: 65534, pid: getpid(), umask: 0o022) }

  /// A sandbox of `capacity` bytes, UNLOCKED without grace (a lock is LOCKED at once).
  /// - Parameters:
  ///   - configure: changes the options.
  ///   - prepare: fills the backing directory before the filesystem indexes it (as a
  ///     tree copied in before a mount).
  ///   - driver: what serves it (one with a stand-in for the kernel's passthrough, say).
  ///   - tmpfs: mount options of a tmpfs for the backing directory (``SandboxRoot``).
  convenience init(
    capacity: Int64 = 64 << 20, _ configure: (inout SandboxOptions) -> Void = { _ in },
    prepare: (String) throws -> Void = { _ in }, driver: InMemoryDriver = InMemoryDriver(), tmpfs: String? = nil,
    runs: (any RunMembership)? = nil
  ) throws {
    let root = try SandboxRoot(tmpfs: tmpfs)
    try prepare(root.backing)
    try self.init(root: root, capacity: capacity, events: "events.jsonl", driver: driver, runs: runs, configure)
  }

  private init(
    root: SandboxRoot, capacity: Int64, events: String, driver: InMemoryDriver, runs: (any RunMembership)? = nil,
    _ configure: (inout SandboxOptions) -> Void
  ) throws {
    temporary = root
    eventsPath = root.base + "/" + events
    var options = SandboxOptions()
    options.capacity = capacity
    options.gracePeriod = 0
    configure(&options)
    options.eventsPath = eventsPath
    self.options = options
    self.driver = driver
    fs = try SandboxFilesystem(
      backingDirectory: root.backing, configuration: CacheTimeouts(), options: options, driver: driver, runs: runs)
    fs.mounted(notifier: notifier)
  }

  /// A new filesystem over the same backing directory (a remount): it indexes the tree
  /// afresh and draws a new generation; its events go to a log of its own.
  func remount(capacity: Int64? = nil, _ configure: (inout SandboxOptions) -> Void = { _ in }) throws -> Sandbox {
    fs.unmounted()
    var count = 1
    while TestFiles.exists(temporary.base + "/events-\(count).jsonl") { count += 1 }
    return try Sandbox(
      root: temporary, capacity: capacity ?? options.capacity, events: "events-\(count).jsonl",
      driver: InMemoryDriver(),
      { options in
        options = self.options
        if let capacity { options.capacity = capacity }
        configure(&options)
      })
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
  func open(_ path: String, flags: Int32 = O_RDONLY, as caller: Caller = root) throws(Errno) -> (
    node: NodeID, handle: FileHandle
  ) {
    let node = try lookup(path)
    return (node, try fs.open(caller, node: node, flags: flags).handle)
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

  @discardableResult
  func mkdir(_ path: String, mode: mode_t = 0o755, as caller: Caller = root) throws(Errno) -> NodeID {
    let (parent, name) = try parent(of: path)
    return try FileName.withBytes(name) { (name) throws(Errno) in
      try fs.mkdir(caller, parent: parent, name: name, mode: mode).node
    }
  }

  func unlink(_ path: String) throws(Errno) {
    let (parent, name) = try parent(of: path)
    try FileName.withBytes(name) { (name) throws(Errno) in try fs.unlink(Self.root, parent: parent, name: name) }
  }

  func rename(_ path: String, to newPath: String, flags: UInt32 = 0) throws(Errno) {
    let (from, name) = try parent(of: path)
    let (to, newName) = try parent(of: newPath)
    try FileName.withBytes(name) { (name) throws(Errno) in
      try FileName.withBytes(newName) { (newName) throws(Errno) in
        try fs.rename(Self.root, parent: from, name: name, newParent: to, newName: newName, flags: flags)
      }
    }
  }

  func setxattr(_ path: String, _ name: String, _ value: String) throws(Errno) {
    try setxattr(path, name, bytes: Array(value.utf8))
  }

  /// `setxattr` of raw bytes, with `XATTR_CREATE`/`XATTR_REPLACE` in `flags`.
  func setxattr(_ path: String, _ name: String, bytes value: [UInt8], flags: Int32 = 0) throws(Errno) {
    let node = try lookup(path)
    try setxattr(node, Array(name.utf8), value, flags: flags)
  }

  /// `setxattr` on a node, of a name given as bytes.
  func setxattr(_ node: NodeID, _ name: [UInt8], _ value: [UInt8], flags: Int32 = 0) throws(Errno) {
    try FileName.withBytes(name) { (name) throws(Errno) in
      try value.withUnsafeBytes { bytes in
        Result { () throws(Errno) in try fs.setxattr(Self.root, node: node, name: name, value: bytes, flags: flags) }
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
    (try? Sys.lstatPath(backing + "/" + path)) != nil  // absent: the meaning of any error here
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

  /// Free bytes, by the ledger.
  var free: Int64 { fs.storage.books.withLock { $0.ledger.free } }

  /// Purgeable bytes by domain, by the catalog.
  var purgeable: [StorageDomain: Int64] {
    fs.storage.books.withLock { books in
      Dictionary(uniqueKeysWithValues: StorageDomain.purgeOrder.map { ($0, books.catalog.purgeableBytes(domain: $0)) })
    }
  }

  /// Bytes of the files on the purge catalog by domain, open ones included.
  var tracked: [StorageDomain: Int64] {
    fs.storage.books.withLock { books in
      Dictionary(uniqueKeysWithValues: StorageDomain.purgeOrder.map { ($0, books.catalog.trackedBytes(domain: $0)) })
    }
  }

  /// Files on the purge catalog.
  var purgeableFiles: Int { fs.storage.books.withLock { $0.catalog.count } }

  /// Expects the books to be exact: usage by domain and purgeable bytes as a fresh
  /// mount-time scan of the backing tree finds them, the total as `du` counts the tree
  /// (allocated blocks, hard links once), each domain's usage as `du` counts its
  /// directory, the catalog the files and bytes the scan finds (open files included), and
  /// nothing in flight.
  func expectExactBooks(sourceLocation: SourceLocation = #_sourceLocation) throws {
    let rescan = try SandboxFilesystem(
      backingDirectory: backing, configuration: CacheTimeouts(), options: options, driver: InMemoryDriver())
    let fresh = Sandbox.books(of: rescan)
    let usage = self.usage
    #expect(usage == fresh.usage, "usage by domain", sourceLocation: sourceLocation)
    // A fresh scan has nothing open: every file it catalogs is purgeable.
    #expect(tracked == fresh.purgeable, "catalogued bytes", sourceLocation: sourceLocation)
    #expect(
      fs.storage.books.withLock { $0.catalog.count } == rescan.storage.books.withLock { $0.catalog.count },
      "catalogued files", sourceLocation: sourceLocation)
    #expect(used == Self.diskUsage(backing), "used against du", sourceLocation: sourceLocation)
    for domain in [StorageDomain.documents, .applicationSupport, .preferences, .caches, .tmp] {
      let path =
        backing + "/" + domain.rootComponents.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
      #expect(usage[domain] == Self.diskUsage(path), "\(domain) against du", sourceLocation: sourceLocation)
    }
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
      guard let st = try? Sys.lstatPath(next) else { continue }  // gone meanwhile: nothing to count
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

  /// The event log's events of `kind`, decoded.
  func eventObjects(_ kind: String) -> [[String: Any]] {
    events(kind).compactMap { TestFiles.jsonObject($0) }
  }

  /// The paths of the purge events, in log order (of one `reason`, or all).
  func purgedPaths(reason: String? = nil) -> [String] {
    eventObjects("purge").filter { reason == nil || $0["reason"] as? String == reason }.compactMap {
      $0["path"] as? String
    }
  }

  /// `appbox status --json`'s object, decoded.
  var status: [String: Any] { TestFiles.jsonObject(fs.statusJSON()) ?? [:] }

  /// Waits up to `seconds` for `condition` (notifications are sent from the maintenance
  /// queue, timed transitions and background purges run there: a loaded machine delays
  /// them).
  func eventually(seconds: Double = 30, _ condition: () -> Bool) -> Bool {
    let deadline = Clock.monotonic() + seconds
    while !condition() {
      if Clock.monotonic() > deadline { return false }
      Clock.sleep(seconds: 0.005)
    }
    return true
  }
}
