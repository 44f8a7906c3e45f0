import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

/// A device's backing tree at mount (docs/reference.md#a-device): its apps and groups are
/// read from the containers' metadata files alone (the backing tree is the one record), an
/// install or removal a crash interrupted is finished, and missing directories of the
/// layout are made again.
///
/// What a mount trusts it checks first, and refuses (changing nothing) what it cannot take
/// for a device: a container whose directory name is not an id or whose metadata is
/// missing, unreadable or names another id, an id that is both an app's and a group's, a
/// device's backing mounted as a plain sandbox and the reverse.
public enum DeviceBacking {
  /// Why a backing directory cannot be mounted as asked.
  public struct Problem: Error, CustomStringConvertible, Sendable {
    /// What is wrong and what to do.
    public let description: String
    /// The system call's error, when that is what went wrong.
    public let errno: Errno?

    init(_ description: String, errno: Errno? = nil) {
      self.description = description
      self.errno = errno
    }
  }

  /// What a device's backing holds.
  struct Contents {
    /// The apps and their groups, from the apps' metadata.
    var apps = DeviceApps()
    /// The groups that have a directory.
    var groupDirectories: Set<ContainerIdentifier> = []
    /// AppBox's staging entries left by an interrupted install or removal, by kind.
    var staging: [(ContainerKind, [UInt8])] = []
  }

  /// Checks, changing nothing, that the backing directory `path` can be mounted as a device
  /// (`device`) or as a plain sandbox.
  /// - Throws: ``Problem`` saying what is wrong.
  public static func check(_ path: String, device: Bool) throws(Problem) {
    let rootFD: Int32
    do throws(Errno) { rootFD = try Sys.openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } catch {
      throw Problem("cannot open \(path): \(error)", errno: error)
    }
    defer { Sys.close(rootFD) }
    try checkKind(rootFD: rootFD, device: device)
    if device { _ = try read(rootFD: rootFD) }
  }

  /// The apps and their groups of the device whose backing directory is open as `rootFD`,
  /// read from the containers' metadata through the descriptor (no symlink followed),
  /// changing nothing (what a backup of it holds).
  /// - Throws: ``Problem`` when it is not a consistent device.
  public static func apps(rootFD: Int32) throws(Problem) -> DeviceApps {
    try checkKind(rootFD: rootFD, device: true)
    return try read(rootFD: rootFD).apps
  }

  /// Refuses a device's backing for a plain mount (it has `Containers/`) and a plain
  /// sandbox's for a device (it has `Documents/`, `Library/` or `tmp/`).
  static func checkKind(rootFD: Int32, device: Bool) throws(Problem) {
    if device {
      for name in ["Documents", "Library", "tmp"] where try exists(name, in: rootFD) {
        throw Problem(
          "the backing directory holds one app's sandbox (\(name)/), not a device: mount it without --device")
      }
    } else if try exists("Containers", in: rootFD) {
      throw Problem("the backing directory holds a device (Containers/): mount it with --device (-o device)")
    }
  }

  /// Reads the containers of a device's backing, changing nothing.
  static func read(rootFD: Int32) throws(Problem) -> Contents {
    var contents = Contents()
    var apps: [ContainerMetadata] = []
    for kind in ContainerKind.allCases {
      let path = kind.parentComponents.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
      guard let directoryFD = try openExisting(kind.parentComponents, in: rootFD) else { continue }
      defer { Sys.close(directoryFD) }
      let stream: DirectoryStream
      do throws(Errno) {
        stream = try DirectoryStream(fd: try Sys.reopen(directoryFD, flags: O_RDONLY | O_DIRECTORY | O_CLOEXEC))
      } catch {
        throw Problem("cannot list \(path): \(error)", errno: error)
      }
      while true {
        let item: DirectoryStream.Item
        do throws(Errno) {
          guard let next = try stream.next() else { break }
          item = next
        } catch {
          throw Problem("cannot list \(path): \(error)", errno: error)
        }
        if isDotOrDotDot(item.name) { continue }
        let name = FileName(item.name).bytes
        let shown = "\(path)/\(String(decoding: name, as: UTF8.self))"
        if DeviceLayout.isStaging(name) {
          contents.staging.append((kind, name))
          continue
        }
        guard let id = ContainerIdentifier(bytes: name) else {
          throw Problem("\(shown): not a \(kind == .app ? "bundle" : "group") id; only containers may be there")
        }
        let metadata = try readMetadata(of: id, kind: kind, in: stream.fd, shown: shown)
        if kind == .app { apps.append(metadata) } else { contents.groupDirectories.insert(id) }
      }
    }
    for metadata in apps.sorted(by: { $0.identifier < $1.identifier }) {
      do throws(DeviceApps.Refusal) { try contents.apps.install(metadata.identifier, groups: metadata.groups) } catch {
        throw Problem("Containers/Data/Application/\(metadata.identifier): \(error)")
      }
    }
    for group in contents.groupDirectories where contents.apps.isInstalled(group) {
      throw Problem("\(group) is both an app's and a group's container: remove one of them from the backing directory")
    }
    return contents
  }

  /// The metadata file's name, for messages.
  private static let metadataName = String(decoding: DeviceLayout.metadataFileName, as: UTF8.self)

  /// A container's metadata file, checked against the directory it is in.
  private static func readMetadata(of id: ContainerIdentifier, kind: ContainerKind, in parentFD: Int32, shown: String)
    throws(Problem) -> ContainerMetadata
  {
    let containerFD: Int32
    do throws(Errno) {
      containerFD = try FileName.withBytes(id.bytes) { (name) throws(Errno) -> Int32 in
        try Sys.openat(parentFD, name.cString, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
      }
    } catch {
      let notADirectory = error == .notDirectory || error == .tooManySymlinks
      throw Problem(
        notADirectory ? "\(shown) is not a directory" : "\(shown): \(error)", errno: notADirectory ? nil : error)
    }
    defer { Sys.close(containerFD) }
    let bytes: [UInt8]
    do throws(Errno) {
      // Without blocking (a FIFO put there would hold the mount, or root's backup of
      // another user's device, forever), and only a regular file: anything else is no record.
      let fd = try FileName.withBytes(DeviceLayout.metadataFileName) { (name) throws(Errno) -> Int32 in
        try Sys.openat(containerFD, name.cString, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
      }
      defer { Sys.close(fd) }
      guard try Sys.fstat(fd).st_mode & S_IFMT == S_IFREG else { throw Errno.tooManySymlinks }  // as a symlink is
      bytes = try Sys.readToEnd(fd, limit: 1 << 20)
    } catch {
      let problem: String? =
        switch error {
        case .noEntry: "has no \(metadataName)"
        case .tooManySymlinks: "holds a \(metadataName) that is not a regular file"
        default: nil
        }
      throw Problem(
        problem.map { "\(shown) \($0): it is not a container" } ?? "\(shown): \(error)",
        errno: problem == nil ? error : nil)
    }
    let metadata: ContainerMetadata
    do throws(ContainerMetadata.Problem) { metadata = try ContainerMetadata(decoding: bytes, kind: kind) } catch {
      throw Problem("\(shown)'s metadata: \(error)")
    }
    guard metadata.identifier == id else {
      throw Problem("\(shown)'s metadata names \(metadata.identifier), not the directory's id")
    }
    return metadata
  }

  /// Makes a device's backing ready to mount: its own directories made, staging entries
  /// removed (an interrupted install never happened, an interrupted removal is finished),
  /// groups no app names removed (the end of an interrupted removal, as a group goes with
  /// its last member), groups an app names made, every container's fixed directories made.
  /// - Returns: the apps and their groups.
  static func prepare(rootFD: Int32) throws(Problem) -> DeviceApps {
    try checkKind(rootFD: rootFD, device: true)
    do throws(Errno) {
      for directory in DeviceLayout.creationOrder { _ = try makeDirectories(directory.components, in: rootFD) }
    } catch {
      throw Problem("cannot make the device's directories: \(error)", errno: error)
    }
    let contents = try read(rootFD: rootFD)
    do throws(Errno) {
      for (kind, name) in contents.staging {
        let parent = try makeDirectories(kind.parentComponents, in: rootFD)
        defer { Sys.close(parent) }
        try TreeRemoval.remove(name, in: parent)
      }
      let named = Set(contents.apps.groups.keys)
      let groupsFD = try makeDirectories(ContainerKind.group.parentComponents, in: rootFD)
      defer { Sys.close(groupsFD) }
      for orphan in contents.groupDirectories.subtracting(named) {
        try TreeRemoval.remove(orphan.bytes, in: groupsFD)
      }
      for group in named.subtracting(contents.groupDirectories) {
        try createContainer(
          ContainerMetadata(identifier: group, kind: .group, uuid: newUUID()), in: groupsFD, as: group.bytes)
      }
      for kind in ContainerKind.allCases {
        let ids = kind == .app ? Array(contents.apps.apps.keys) : Array(named)
        let parent = try makeDirectories(kind.parentComponents, in: rootFD)
        defer { Sys.close(parent) }
        for id in ids {
          let fd = try FileName.withBytes(id.bytes) { (name) throws(Errno) -> Int32 in
            try Sys.openat(parent, name.cString, Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
          }
          defer { Sys.close(fd) }
          for fixed in kind.fixedDirectories { Sys.close(try makeDirectories(fixed.components, in: fd)) }
        }
      }
    } catch {
      throw Problem("cannot prepare the device's containers: \(error)", errno: error)
    }
    return contents.apps
  }

  /// Makes a container named `name` in `parentFD`: its root, its fixed directories and its
  /// metadata file (written, synced and closed before the caller renames it into place).
  static func createContainer(_ metadata: ContainerMetadata, in parentFD: Int32, as name: [UInt8]) throws(Errno) {
    let fd = try makeDirectories([name], in: parentFD)
    defer { Sys.close(fd) }
    for fixed in metadata.kind.fixedDirectories { Sys.close(try makeDirectories(fixed.components, in: fd)) }
    let file = try FileName.withBytes(DeviceLayout.metadataFileName) { (cname) throws(Errno) -> Int32 in
      try Sys.openat(fd, cname.cString, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
    }
    defer { Sys.close(file) }
    try Sys.writeAll(file, metadata.encoded)
    try Sys.fsync(file, dataOnly: false)
  }

  /// Opens (`O_PATH`) the directory at `components` below `fd`, making what is missing.
  /// - Throws: EEXIST-like errors when a component is not a directory (ENOTDIR), or the
  ///   calls' errors.
  public static func makeDirectories(_ components: [[UInt8]], in fd: Int32) throws(Errno) -> Int32 {
    var current = try Sys.dup(fd)
    for component in components {
      let next = try FileName.withBytes(component) { (name) throws(Errno) -> Int32 in
        do throws(Errno) {
          return try Sys.openat(current, name.cString, Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        } catch  where error == .noEntry {
          try Sys.mkdirat(current, name.cString, 0o755)
          return try Sys.openat(current, name.cString, Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        }
      }
      Sys.close(current)
      current = next
    }
    return current
  }

  /// Opens (`O_PATH`) the directory at `components` below `fd`; nil when it is missing.
  private static func openExisting(_ components: [[UInt8]], in fd: Int32) throws(Problem) -> Int32? {
    var current: Int32
    do throws(Errno) { current = try Sys.dup(fd) } catch { throw Problem("cannot duplicate a descriptor: \(error)") }
    for component in components {
      do throws(Errno) {
        let next = try FileName.withBytes(component) { (name) throws(Errno) -> Int32 in
          try Sys.openat(current, name.cString, Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        }
        Sys.close(current)
        current = next
      } catch {
        Sys.close(current)
        if error == .noEntry { return nil }
        let path = components.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
        throw Problem(
          error == .notDirectory ? "\(path) is not a directory" : "cannot open \(path): \(error)",
          errno: error == .notDirectory ? nil : error)
      }
    }
    return current
  }

  /// Whether `name` exists in `fd` (as anything).
  /// - Throws: ``Problem`` when that cannot be told (any error but ENOENT).
  private static func exists(_ name: String, in fd: Int32) throws(Problem) -> Bool {
    do throws(Errno) {
      _ = try Sys.fstatat(fd, name, AT_SYMLINK_NOFOLLOW)
      return true
    } catch  where error == .noEntry {
      return false
    } catch {
      throw Problem("cannot look at \(name) in the backing directory: \(error)", errno: error)
    }
  }

  /// A random UUID in iOS's form (upper-case hex, version 4).
  static func newUUID() -> String {
    var bytes = (0..<16).map { _ in UInt8.random(in: 0...255) }
    bytes[6] = bytes[6] & 0x0F | 0x40
    bytes[8] = bytes[8] & 0x3F | 0x80
    let hex = bytes.map { String($0, radix: 16, uppercase: true).leftPadded(to: 2) }
    return [0..<4, 4..<6, 6..<8, 8..<10, 10..<16].map { hex[$0].joined() }.joined(separator: "-")
  }
}

extension String {
  /// The string with zeros in front, up to `width` characters.
  fileprivate func leftPadded(to width: Int) -> String {
    String(repeating: "0", count: max(0, width - count)) + self
  }
}
