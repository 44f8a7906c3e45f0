import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

/// The container default class a backing directory was last mounted with, kept on its
/// root directory, so that a file keeps the class it was created with whatever the
/// mount's default later becomes.
///
/// Items created with the container default store no class (one attribute write less per
/// create): they have the default. Before a mount with another default, every file and
/// directory without a class is given the old one, as the class it inherited.
public enum DefaultProtection {
  /// Where the default is kept, on the backing root (hidden: the mount's root shows only
  /// its documented attributes).
  public static let attributeName = "user.appbox.default-protection"

  /// Refuses a backing directory whose recorded default names no class, or cannot be
  /// read: AppBox cannot tell which class its items without one were created with, and
  /// guessing would change their class silently (docs/reference.md, Data Protection).
  /// - Throws: ``SandboxSetupError/unknownDefaultProtection(value:)`` or
  ///   ``SandboxSetupError/unreadableDefaultProtection(_:)``.
  static func check(rootFD: Int32) throws(SandboxSetupError) {
    switch record(rootFD: rootFD) {
    case .absent, .valid: return
    case .unparsable(let value): throw .unknownDefaultProtection(value: value)
    case .unreadable(let errno): throw .unreadableDefaultProtection(Errno(rawValue: errno))
    }
  }

  /// Makes `new` the default of the backing directory `rootFD`. A directory mounted
  /// before with another default first has its items without a class stamped with that
  /// one (a crash part-way stamps again at the next mount: the old default is recorded
  /// only once every item has it).
  /// - Returns: how many items were given the old default.
  /// - Throws: ``Errno`` when the root's record cannot be read, names no class (EINVAL,
  ///   see ``check(rootFD:)``) or cannot be written, or an item cannot be stamped (then the
  ///   record is unchanged and the mount must not go on).
  @discardableResult
  static func adopt(_ new: ProtectionClass, rootFD: Int32, layout: SandboxLayout.Parent = .root) throws(Errno) -> Int {
    var stamped = 0
    if let old = try recorded(rootFD: rootFD), old != new {
      stamped = try stamp(old, under: rootFD, layout: layout)
    }
    if try recorded(rootFD: rootFD) != new {
      try Xattr.set(rootFD, name: attributeName, value: Array(new.name.utf8))
    }
    return stamped
  }

  /// The default recorded on the root, if any.
  /// - Throws: the read's ``Errno``; `EINVAL` when the record names no class (never
  ///   taken for "no record").
  public static func recorded(rootFD: Int32) throws(Errno) -> ProtectionClass? {
    switch record(rootFD: rootFD) {
    case .absent: return nil
    case .valid(let protectionClass): return protectionClass
    case .unparsable: throw .invalidArgument
    case .unreadable(let errno): throw Errno(rawValue: errno)
    }
  }

  /// What the root's record holds (only `ENODATA` is "no record").
  public static func record(rootFD: Int32) -> StoredProtection {
    do throws(Errno) {
      return StoredProtection(value: try Xattr.value(rootFD, name: attributeName))
    } catch  where error == .noData {
      return .absent
    } catch {
      return .unreadable(errno: error.rawValue)
    }
  }

  /// Gives `old` to every file and directory below `directoryFD` that has no class,
  /// except what the layout made (fixed directories, a device's directories, containers
  /// and their metadata files: their children follow the mount's default).
  private static func stamp(_ old: ProtectionClass, under directoryFD: Int32, layout: SandboxLayout.Parent)
    throws(Errno) -> Int
  {
    let value = Array(old.name.utf8)
    let stream = try DirectoryStream(
      fd: try Sys.reopen(directoryFD, flags: O_RDONLY | O_DIRECTORY | O_CLOEXEC | Linux.openNoAccessTime))
    var stamped = 0
    while let item = try stream.next() {
      if isDotOrDotDot(item.name) { continue }
      let fd: Int32
      do throws(Errno) {
        fd = try Sys.openat(stream.fd, item.name, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
      } catch  where error == .noEntry {
        continue
      }
      defer { Sys.close(fd) }
      let type = try Sys.fstat(fd).st_mode & S_IFMT
      guard type == S_IFREG || type == S_IFDIR else { continue }
      let entry = SandboxLayout.entry(named: FileName(item.name), in: layout, isDirectory: type == S_IFDIR)
      if !entry.isLayout, try !hasClass(fd) {
        try Xattr.set(fd, name: AppBoxAttribute.inheritedProtectionName, value: value)
        stamped += 1
      }
      if type == S_IFDIR {
        stamped += try stamp(old, under: fd, layout: entry.place)
      }
    }
    return stamped
  }

  /// Whether the item carries a class of its own or an inherited one.
  private static func hasClass(_ fd: Int32) throws(Errno) -> Bool {
    for name in [AppBoxAttribute.protection.name, AppBoxAttribute.inheritedProtectionName] {
      do throws(Errno) {
        _ = try Xattr.value(fd, name: name)
        return true
      } catch  where error == .noData {
        continue
      }
    }
    return false
  }
}
