import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// What the tree walker records about one entry (never follows symlinks).
struct TreeEntry: Equatable, CustomStringConvertible {
  /// `f` regular file, `d` directory, `l` symlink, `o` other.
  var kind: Character
  /// Permission bits including setuid/setgid/sticky (`st_mode & 0o7777`).
  var mode: UInt32
  /// Size of regular files and symlinks (0 for directories).
  var size: Int64
  var nlink: Int?
  var owner: String?
  /// `mtime` as seconds.nanoseconds, when asked for (regular files and directories).
  var mtime: String?
  var linkTarget: [UInt8]?
  /// Extended attributes of files and directories, name → value.
  var xattrs: [[UInt8]: [UInt8]]?
  /// For regular files with more than one link: the smallest relative path of the same
  /// inode in the tree, so hard-link groups compare across trees.
  var linkGroup: String?
  /// Inode number (not compared; used to build `linkGroup`).
  var inode: UInt64 = 0

  static func == (a: TreeEntry, b: TreeEntry) -> Bool {
    a.kind == b.kind && a.mode == b.mode && a.size == b.size && a.nlink == b.nlink && a.owner == b.owner
      && a.mtime == b.mtime && a.linkTarget == b.linkTarget && a.xattrs == b.xattrs && a.linkGroup == b.linkGroup
  }

  var description: String {
    var parts = ["\(kind)", String(mode, radix: 8), "size=\(size)"]
    if let nlink { parts.append("nlink=\(nlink)") }
    if let owner { parts.append("owner=\(owner)") }
    if let mtime { parts.append("mtime=\(mtime)") }
    if let linkTarget { parts.append("-> \(String(decoding: linkTarget, as: UTF8.self))") }
    if let xattrs, !xattrs.isEmpty {
      let shown = xattrs.keys.sorted { $0.lexicographicallyPrecedes($1) }.map {
        "\(String(decoding: $0, as: UTF8.self))=\(xattrs[$0]!.map { String($0, radix: 16) }.joined())"
      }
      parts.append("xattrs{\(shown.joined(separator: ","))}")
    }
    if let linkGroup { parts.append("group=\(linkGroup)") }
    return parts.joined(separator: " ")
  }
}

/// Walks directory trees with plain syscalls and compares them: names, types, modes,
/// sizes, symlink targets, extended attributes, hard-link groups and file contents.
struct TreeComparison {
  var compareNlink = true
  var compareOwner = false
  var compareMtime = false
  var compareXattrs = true
  /// Only attributes whose name satisfies this are compared (default: all).
  var xattrFilter: ([UInt8]) -> Bool = { _ in true }
  /// How an attribute's name is compared (default: as it is), so that a plain directory
  /// can stand in for names it cannot store.
  var xattrName: ([UInt8]) -> [UInt8] = { $0 }

  /// Every entry below `root` (not `root` itself), keyed by relative path (raw bytes:
  /// Linux names need not be UTF-8).
  func snapshot(_ root: String) throws -> [TreePath: TreeEntry] {
    var entries: [TreePath: TreeEntry] = [:]
    try walk(root: TreePath(root), relative: TreePath(), into: &entries)
    // Hard-link groups: regular files sharing an inode get the smallest path as their id.
    var groups: [UInt64: [TreePath]] = [:]
    for (path, entry) in entries where entry.kind == "f" { groups[entry.inode, default: []].append(path) }
    for paths in groups.values where paths.count > 1 {
      let id = paths.min()!
      for path in paths { entries[path]!.linkGroup = id.description }
    }
    return entries
  }

  private func walk(root: TreePath, relative: TreePath, into entries: inout [TreePath: TreeEntry]) throws {
    let directory = relative.isEmpty ? root : root + relative
    for name in try Self.names(in: directory) {
      let path = relative.isEmpty ? TreePath(name) : relative + TreePath(name)
      let full = root + path
      var info = stat()
      guard full.withCString({ lstat($0, &info) }) == 0 else {
        throw TreeError("lstat \(full): \(String(cString: strerror(errno)))")
      }
      let type = info.st_mode & S_IFMT
      var entry = TreeEntry(
        kind: type == S_IFREG ? "f" : type == S_IFDIR ? "d" : type == S_IFLNK ? "l" : "o",
        mode: UInt32(info.st_mode & 0o7777), size: type == S_IFDIR ? 0 : Int64(info.st_size))
      entry.inode = UInt64(info.st_ino)
      if compareNlink { entry.nlink = Int(info.st_nlink) }
      if compareOwner { entry.owner = "\(info.st_uid):\(info.st_gid)" }
      if compareMtime, type != S_IFLNK { entry.mtime = "\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)" }
      if type == S_IFLNK {
        entry.linkTarget = try Self.readLink(full)
      } else if compareXattrs {
        let xattrs = try Self.xattrs(full).filter { xattrFilter($0.key) }
        entry.xattrs = Dictionary(xattrs.map { (xattrName($0.key), $0.value) }) { first, _ in first }
      }
      entries[path] = entry
      if type == S_IFDIR { try walk(root: root, relative: path, into: &entries) }
    }
  }

  /// Human-readable differences between the trees at `a` and `b` (empty when equal),
  /// including the contents of regular files, at most `limit` of them.
  func differences(_ a: String, _ b: String, limit: Int = 20) throws -> [String] {
    let left = try snapshot(a)
    let right = try snapshot(b)
    var problems: [String] = []
    for path in Set(left.keys).union(right.keys).sorted() {
      guard problems.count < limit else { break }
      switch (left[path], right[path]) {
      case (let l?, nil): problems.append("\(path): only in \(a) (\(l))")
      case (nil, let r?): problems.append("\(path): only in \(b) (\(r))")
      case (let l?, let r?):
        if l != r {
          problems.append("\(path): \(l)  ≠  \(r)")
        } else if l.kind == "f", let difference = try Self.contentDifference(TreePath(a) + path, TreePath(b) + path) {
          problems.append("\(path): contents differ (\(difference))")
        }
      default: break
      }
    }
    return problems
  }

  // MARK: - Syscall helpers

  /// Entry names of a directory, sorted, without `.` and `..`.
  static func names(in directory: TreePath) throws -> [[UInt8]] {
    guard let stream = directory.withCString({ opendir($0) }) else {
      throw TreeError("opendir \(directory): \(String(cString: strerror(errno)))")
    }
    defer { closedir(stream) }
    var names: [[UInt8]] = []
    while let entry = readdir(stream) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
      if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
    }
    return names.sorted { $0.lexicographicallyPrecedes($1) }
  }

  static func readLink(_ path: TreePath) throws -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = buffer.withUnsafeMutableBytes { b in
      path.withCString { readlink($0, b.baseAddress!.assumingMemoryBound(to: CChar.self), 4096) }
    }
    guard count >= 0 else { throw TreeError("readlink \(path): \(String(cString: strerror(errno)))") }
    return Array(buffer[..<count])
  }

  /// All extended attributes of a file or directory (follows symlinks: call it on those only).
  static func xattrs(_ path: String) throws -> [[UInt8]: [UInt8]] { try xattrs(TreePath(path)) }

  static func xattrs(_ path: TreePath) throws -> [[UInt8]: [UInt8]] {
    var list = [UInt8](repeating: 0, count: 65536)
    let length = list.withUnsafeMutableBytes { b in
      path.withCString { cposix_listxattr($0, b.baseAddress!.assumingMemoryBound(to: CChar.self), b.count) }
    }
    guard length >= 0 else { throw TreeError("listxattr \(path): \(String(cString: strerror(errno)))") }
    var result: [[UInt8]: [UInt8]] = [:]
    for name in list[..<length].split(separator: 0) {
      var value = [UInt8](repeating: 0, count: 65536)
      let size = value.withUnsafeMutableBytes { buffer in
        (Array(name) + [0]).withUnsafeBufferPointer { n in
          n.withMemoryRebound(to: CChar.self) { nb in
            path.withCString { cposix_getxattr($0, nb.baseAddress!, buffer.baseAddress, buffer.count) }
          }
        }
      }
      guard size >= 0 else {
        throw TreeError(
          "getxattr \(path) \(String(decoding: name, as: UTF8.self)): \(String(cString: strerror(errno)))")
      }
      result[Array(name)] = Array(value[..<size])
    }
    return result
  }

  /// Where two files' contents first differ, or nil when they are equal.
  static func contentDifference(_ a: TreePath, _ b: TreePath) throws -> String? {
    let fa = a.withCString { open($0, O_RDONLY | O_CLOEXEC) }
    guard fa >= 0 else { throw TreeError("open \(a): \(String(cString: strerror(errno)))") }
    defer { close(fa) }
    let fb = b.withCString { open($0, O_RDONLY | O_CLOEXEC) }
    guard fb >= 0 else { throw TreeError("open \(b): \(String(cString: strerror(errno)))") }
    defer { close(fb) }
    let chunk = 1 << 20
    var bufferA = [UInt8](repeating: 0, count: chunk)
    var bufferB = [UInt8](repeating: 0, count: chunk)
    var offset = 0
    while true {
      let countA = try readFully(fa, &bufferA, a)
      let countB = try readFully(fb, &bufferB, b)
      if countA != countB { return "lengths differ after offset \(offset)" }
      if countA == 0 { return nil }
      let equal = bufferA.withUnsafeBytes { pa in
        bufferB.withUnsafeBytes { pb in memcmp(pa.baseAddress!, pb.baseAddress!, countA) == 0 }
      }
      if !equal {
        let index = (0..<countA).first { bufferA[$0] != bufferB[$0] }!
        return "first difference at byte \(offset + index)"
      }
      offset += countA
    }
  }

  /// Reads until `buffer` is full or end of file.
  private static func readFully(_ fd: Int32, _ buffer: inout [UInt8], _ path: TreePath) throws -> Int {
    var total = 0
    while total < buffer.count {
      let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, $0.count - total) }
      if count < 0 {
        if errno == EINTR { continue }
        throw TreeError("read \(path): \(String(cString: strerror(errno)))")
      }
      if count == 0 { break }
      total += count
    }
    return total
  }
}

struct TreeError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}

/// A path as raw bytes (Linux names need not be valid UTF-8); `+` joins with `/`.
struct TreePath: Hashable, Comparable, CustomStringConvertible {
  var bytes: [UInt8]

  init() { bytes = [] }
  init(_ string: String) { bytes = Array(string.utf8) }
  init(_ bytes: [UInt8]) { self.bytes = bytes }

  var isEmpty: Bool { bytes.isEmpty }

  static func + (a: TreePath, b: TreePath) -> TreePath { TreePath(a.bytes + [0x2F] + b.bytes) }
  static func < (a: TreePath, b: TreePath) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }

  /// Calls `body` with the path as a C string.
  func withCString<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
    try (bytes + [0]).withUnsafeBufferPointer { try $0.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) } }
  }

  /// The path, with bytes of invalid UTF-8 shown as `\xNN`.
  var description: String {
    if let valid = String(validating: bytes, as: UTF8.self) { return valid }
    return bytes.map { $0 >= 0x20 && $0 < 0x7F ? String(UnicodeScalar($0)) : "\\x" + String($0, radix: 16) }.joined()
  }
}
