import FilesystemInterface
import Posix
import SandboxPolicy

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// An open file as the tests hold it: its node and handle.
typealias OpenFile = (node: NodeID, handle: FileHandle)

// MARK: - More requests by path

extension Sandbox {
  /// `getattr` of `path`.
  func getattr(_ path: String) throws(Errno) -> stat {
    try fs.getattr(Self.root, node: try lookup(path), handle: nil)
  }

  /// `setattr` of the size (a truncate by path, or through `file`'s handle).
  func truncate(_ path: String, to size: off_t, as caller: Caller = root) throws(Errno) {
    var attributes = stat()
    attributes.st_size = size
    _ = try fs.setattr(caller, node: try lookup(path), attributes: attributes, fields: .size, handle: nil)
  }

  /// `setattr` of the size through an open handle (`ftruncate`).
  func truncate(_ file: OpenFile, to size: off_t) throws(Errno) {
    var attributes = stat()
    attributes.st_size = size
    _ = try fs.setattr(Self.root, node: file.node, attributes: attributes, fields: .size, handle: file.handle)
  }

  /// `setattr` of the mode.
  func chmod(_ path: String, _ mode: mode_t) throws(Errno) {
    var attributes = stat()
    attributes.st_mode = mode
    _ = try fs.setattr(Self.root, node: try lookup(path), attributes: attributes, fields: .mode, handle: nil)
  }

  /// `setattr` of both times.
  func setTimes(_ path: String, seconds: Int) throws(Errno) {
    var attributes = stat()
    attributes.st_atim = timespec(tv_sec: seconds, tv_nsec: 0)
    attributes.st_mtim = timespec(tv_sec: seconds, tv_nsec: 0)
    _ = try fs.setattr(
      Self.root, node: try lookup(path), attributes: attributes, fields: [.atime, .mtime], handle: nil)
  }

  /// `fallocate` through an open handle.
  func fallocate(_ file: OpenFile, mode: Int32 = 0, offset: off_t, length: off_t) throws(Errno) {
    try fs.fallocate(Self.root, node: file.node, handle: file.handle, mode: mode, offset: offset, length: length)
  }

  /// `fsync` of an open handle.
  func fsync(_ file: OpenFile) throws(Errno) {
    try fs.fsync(Self.root, node: file.node, handle: file.handle, dataOnly: false)
  }

  /// `copy_file_range` of `count` bytes between two open files.
  func copy(from source: OpenFile, at offset: off_t = 0, to target: OpenFile, at targetOffset: off_t = 0, count: Int)
    throws(Errno) -> Int
  {
    try fs.copyFileRange(
      Self.root, from: source.node, handle: source.handle, offset: offset, to: target.node, handle: target.handle,
      offset: targetOffset, count: count, flags: 0)
  }

  /// `mknod`.
  @discardableResult
  func mknod(_ path: String, mode: mode_t, device: dev_t = 0, as caller: Caller = root) throws(Errno) -> NodeID {
    let (parent, name) = try parent(of: path)
    return try FileName.withBytes(name) { (name) throws(Errno) in
      try fs.mknod(caller, parent: parent, name: name, mode: mode, device: device).node
    }
  }

  /// `symlink` of `target` at `path`.
  @discardableResult
  func symlink(_ target: String, at path: String, as caller: Caller = root) throws(Errno) -> NodeID {
    let (parent, name) = try parent(of: path)
    return try FileName.withBytes(Array(target.utf8)) { (target) throws(Errno) in
      try FileName.withBytes(name) { (name) throws(Errno) in
        try fs.symlink(caller, target: target, parent: parent, name: name).node
      }
    }
  }

  /// `link` of the file at `path` as `newPath`.
  @discardableResult
  func link(_ path: String, as newPath: String) throws(Errno) -> NodeID {
    let node = try lookup(path)
    let (parent, name) = try parent(of: newPath)
    return try FileName.withBytes(name) { (name) throws(Errno) in
      try fs.link(Self.root, node: node, newParent: parent, newName: name).node
    }
  }

  func rmdir(_ path: String) throws(Errno) {
    let (parent, name) = try parent(of: path)
    try FileName.withBytes(name) { (name) throws(Errno) in try fs.rmdir(Self.root, parent: parent, name: name) }
  }

  /// `readlink`.
  func readlink(_ path: String) throws(Errno) -> String {
    String(decoding: try fs.readlink(Self.root, node: try lookup(path)), as: UTF8.self)
  }

  /// `getxattr` of a name given as a string.
  func getxattr(_ path: String, _ name: String) throws(Errno) -> [UInt8] {
    try getxattr(try lookup(path), Array(name.utf8))
  }

  /// `getxattr` on a node, of a name given as bytes.
  func getxattr(_ node: NodeID, _ name: [UInt8]) throws(Errno) -> [UInt8] {
    try FileName.withBytes(name) { (name) throws(Errno) in try fs.getxattr(Self.root, node: node, name: name) }
  }

  /// `listxattr`, split into names.
  func listxattr(_ path: String) throws(Errno) -> [[UInt8]] {
    try fs.listxattr(Self.root, node: try lookup(path)).split(separator: 0, omittingEmptySubsequences: true).map {
      Array($0)
    }
  }

  /// `listxattr`'s names as strings.
  func xattrNames(_ path: String) throws(Errno) -> Set<String> {
    Set(try listxattr(path).map { String(decoding: $0, as: UTF8.self) })
  }

  /// `removexattr`.
  func removexattr(_ path: String, _ name: String) throws(Errno) {
    let node = try lookup(path)
    try FileName.withBytes(Array(name.utf8)) { (name) throws(Errno) in
      try fs.removexattr(Self.root, node: node, name: name)
    }
  }

  /// The class `path` reads back as (`user.appbox.protection`).
  func protection(_ path: String) throws(Errno) -> String {
    String(decoding: try getxattr(path, AppBoxAttribute.protection.name), as: UTF8.self)
  }

  /// Sets `path`'s class.
  func protect(_ path: String, _ protectionClass: String) throws(Errno) {
    try setxattr(path, AppBoxAttribute.protection.name, protectionClass)
  }

  /// `statfs`.
  func statfs() throws(Errno) -> statvfs { try fs.statfs(Self.root, node: .root) }

  /// Opens `path`, reads it whole and closes it: a use, as an app would make one.
  func use(_ path: String) throws(Errno) {
    let file = try open(path)
    defer { release(file) }
    _ = try read(file, count: 1 << 20)
  }

  /// Writes `bytes` to a new file (or truncates an existing one) and closes it.
  func writeFile(_ path: String, _ bytes: [UInt8]) throws(Errno) {
    let file = try create(path, flags: O_RDWR | O_TRUNC)
    defer { release(file) }
    var done = 0
    while done < bytes.count {
      let chunk = Array(bytes[done..<min(bytes.count, done + (256 << 10))])
      done += try write(file, chunk, at: off_t(done))
    }
  }

  /// The whole content of `path` through the filesystem.
  func contents(_ path: String) throws(Errno) -> [UInt8] {
    let file = try open(path)
    defer { release(file) }
    var all: [UInt8] = []
    while true {
      let chunk = try read(file, count: 1 << 20, at: off_t(all.count))
      if chunk.isEmpty { return all }
      all += chunk
    }
  }

  // MARK: The backing tree

  /// `lstat` of a backing path.
  func backingStat(_ path: String) throws(Errno) -> stat { try Sys.lstatPath(backing + "/" + path) }

  /// The bytes of a backing file.
  func backingContents(_ path: String) throws(Errno) -> [UInt8] { try Sys.readFile(backing + "/" + path) }

  /// A backing attribute of `path` (the symlink itself, never its target), or nil.
  func backingXattr(_ path: String, _ name: String) -> [UInt8]? {
    guard let fd = try? Sys.open(backing + "/" + path, Linux.openPath | O_NOFOLLOW | O_CLOEXEC) else { return nil }
    defer { Sys.close(fd) }
    return try? Xattr.value(fd, name: name)  // nil: no such attribute
  }

  /// The backing names of `path`'s attributes.
  func backingXattrNames(_ path: String) throws(Errno) -> Set<String> {
    let fd = try Sys.open(backing + "/" + path, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
    defer { Sys.close(fd) }
    return Set(try Xattr.names(fd).map { String(decoding: $0, as: UTF8.self) })
  }

  /// Sets a backing attribute (on the backing tree, behind the filesystem's back).
  func setBackingXattr(_ path: String, _ name: String, _ value: [UInt8]) throws(Errno) {
    let fd = try Sys.open(backing + "/" + path, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
    defer { Sys.close(fd) }
    try Xattr.set(fd, name: name, value: value)
  }

  /// The names in a backing directory.
  func backingList(_ path: String) -> [String] {
    TestFiles.entries(of: backing + "/" + path).sorted()
  }

  /// The lookups the kernel would hold on `node` now.
  func lookups(_ node: NodeID) -> UInt64 {
    guard case .held(let inode) = fs.inodes.resolve(node) else { return 0 }
    return inode.lookups.load(ordering: .relaxed)
  }
}

// MARK: - Test data

/// A string's UTF-8 bytes.
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

let kib = 1024
let mib = 1 << 20
