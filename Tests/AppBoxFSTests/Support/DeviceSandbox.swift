import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A device mount's helpers for ``Sandbox``: apps, containers' paths, their books.
extension Sandbox {
  /// A device over a fresh backing directory.
  static func device(capacity: Int64 = 64 << 20, _ configure: (inout SandboxOptions) -> Void = { _ in }) throws
    -> Sandbox
  {
    try Sandbox(capacity: capacity) { options in
      options.device = true
      configure(&options)
    }
  }

  /// An id, known good.
  static func id(_ text: String) -> ContainerIdentifier { try! ContainerIdentifier(validating: text) }

  /// An app's container, below the mount root.
  static func app(_ id: String) -> String { "Containers/Data/Application/\(id)" }

  /// A group's container, below the mount root.
  static func group(_ id: String) -> String { "Containers/Shared/AppGroup/\(id)" }

  /// Installs `app` through the filesystem (as the control channel does).
  @discardableResult
  func install(_ app: String, groups: [String] = []) throws(AppChangeError) -> [String] {
    try fs.installApp(Self.id(app), groups: groups.map(Self.id)).map(\.name)
  }

  /// Removes `app` through the filesystem.
  @discardableResult
  func remove(_ app: String) throws(AppChangeError) -> (groups: [String], files: Int, bytes: Int64) {
    let removed = try fs.removeApp(Self.id(app))
    return (removed.groups.map(\.name), removed.files, removed.bytes)
  }

  /// Usage by container id (and `""` for the device's own directories), as the books hold it.
  var containerUsage: [String: Int64] { Self.containerUsage(of: fs) }

  static func containerUsage(of fs: SandboxFilesystem) -> [String: Int64] {
    let containers = fs.device?.all ?? [:]
    return fs.storage.books.withLock { books in
      var usage = ["": books.ledger.usage(of: .top)]
      for (number, container) in containers { usage[container.id.name] = books.ledger.usage(of: number) }
      return usage
    }
  }

  /// Expects the books to be exact (``expectExactBooks(sourceLocation:)``) and each
  /// container's usage to be what a fresh mount-time scan finds.
  func expectExactDeviceBooks(sourceLocation: SourceLocation = #_sourceLocation) throws {
    try expectExactBooks(sourceLocation: sourceLocation)
    let rescan = try SandboxFilesystem(
      backingDirectory: backing, configuration: CacheTimeouts(), options: options, driver: InMemoryDriver())
    #expect(containerUsage == Self.containerUsage(of: rescan), "usage by container", sourceLocation: sourceLocation)
  }

  /// `rmdir`.
  func rmdir(_ path: String) throws(Errno) {
    let (parent, name) = try parent(of: path)
    try FileName.withBytes(name) { (name) throws(Errno) in try fs.rmdir(Self.root, parent: parent, name: name) }
  }

  /// `link` of `path` as `newPath`.
  func link(_ path: String, as newPath: String) throws(Errno) {
    let node = try lookup(path)
    let (parent, name) = try parent(of: newPath)
    _ = try FileName.withBytes(name) { (name) throws(Errno) in
      try fs.link(Self.root, node: node, newParent: parent, newName: name)
    }
  }

  /// `getxattr`, as text.
  func getxattr(_ path: String, _ name: String) throws(Errno) -> String {
    let node = try lookup(path)
    return String(
      decoding: try FileName.withBytes(Array(name.utf8)) { (name) throws(Errno) in
        try fs.getxattr(Self.root, node: node, name: name)
      }, as: UTF8.self)
  }

  /// Backing paths below `path` (relative, sorted), for "nothing changed" checks.
  func backingTree(_ path: String = "") -> [String] {
    var found: [String] = []
    var stack = [path]
    while let next = stack.popLast() {
      let full = next.isEmpty ? backing : backing + "/" + next
      for entry in TestFiles.entries(of: full) {
        let relative = next.isEmpty ? entry : next + "/" + entry
        found.append(relative)
        if let st = try? Sys.lstatPath(backing + "/" + relative), st.st_mode & S_IFMT == S_IFDIR {
          stack.append(relative)
        }
      }
    }
    return found.sorted()
  }
}
