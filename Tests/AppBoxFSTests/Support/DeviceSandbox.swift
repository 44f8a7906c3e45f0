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
  static func device(
    capacity: Int64 = 64 << 20, runs: (any RunMembership)? = nil, _ configure: (inout SandboxOptions) -> Void = { _ in }
  ) throws -> Sandbox {
    try Sandbox(
      capacity: capacity,
      { options in
        options.device = true
        configure(&options)
      }, runs: runs)
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

  /// Expects a device's books to be exact: usage by domain, by container and by each
  /// container's domain as a fresh mount-time scan finds them and as `du` counts each
  /// container's domain directories, the total as `du` counts the tree, the catalog the
  /// files and bytes the scan finds, nothing in flight.
  func expectExactDeviceBooks(sourceLocation: SourceLocation = #_sourceLocation) throws {
    let rescan = try SandboxFilesystem(
      backingDirectory: backing, configuration: CacheTimeouts(), options: options, driver: InMemoryDriver())
    let byDomain = { (fs: SandboxFilesystem) in
      fs.storage.books.withLock { books in
        Dictionary(uniqueKeysWithValues: StorageDomain.allCases.map { ($0, books.ledger.usage($0)) })
      }
    }
    #expect(byDomain(fs) == byDomain(rescan), "usage by domain", sourceLocation: sourceLocation)
    #expect(containerUsage == Self.containerUsage(of: rescan), "usage by container", sourceLocation: sourceLocation)
    #expect(tracked == Self.trackedBytes(of: rescan), "catalogued bytes", sourceLocation: sourceLocation)
    #expect(
      fs.storage.books.withLock { $0.catalog.count } == rescan.storage.books.withLock { $0.catalog.count },
      "catalogued files", sourceLocation: sourceLocation)
    #expect(used == Self.diskUsage(backing), "used against du", sourceLocation: sourceLocation)
    for (number, container) in fs.device?.all ?? [:] {
      let root = container.components.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
      for directory in container.kind.fixedDirectories where directory.domain != .library {
        let usage = fs.storage.books.withLock { $0.ledger.usage(StorageArea(number, directory.domain)) }
        #expect(
          usage == Self.diskUsage(backing + "/" + root + "/" + directory.path),
          "\(container.id) \(directory.domain) against du", sourceLocation: sourceLocation)
      }
    }
    #expect(fs.storage.books.withLock { $0.inFlight.isEmpty }, sourceLocation: sourceLocation)
  }

  /// Catalogued bytes by purgeable domain.
  static func trackedBytes(of fs: SandboxFilesystem) -> [StorageDomain: Int64] {
    fs.storage.books.withLock { books in
      Dictionary(uniqueKeysWithValues: StorageDomain.purgeOrder.map { ($0, books.catalog.trackedBytes(domain: $0)) })
    }
  }

  /// `getxattr`, as text.
  func getxattrText(_ path: String, _ name: String) throws(Errno) -> String {
    String(decoding: try getxattr(path, name), as: UTF8.self)
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
