/// The bijection between extended-attribute names on the mount and on the backing store.
///
/// Linux filesystems such as ext4 store only `user.`, `trusted.`, `security.` and
/// `system.` names, while Apple's names (`com.apple.MobileBackup`,
/// `com.apple.metadata:com_apple_backup_excludeItem`) have no namespace. The mapping:
///
/// | on the mount | on the backing file |
/// |---|---|
/// | `user.X`, `trusted.X`, `security.X`, `system.X` | unchanged |
/// | any other name `N` (a "foreign" name, e.g. Apple's) | `user.appbox.x.N` |
///
/// `user.appbox.` is AppBox's reserved namespace: only the names AppBox documents may be
/// set there through the mount (``isReserved(_:)``), so no program attribute collides with
/// an encoded foreign name and `listxattr` on the mount shows exactly what was set.
public enum XattrNameMapping {
  /// The reserved namespace for AppBox's own attributes.
  public static let reservedPrefix: [UInt8] = Array("user.appbox.".utf8)
  /// Where foreign (namespace-less) names are kept on the backing store.
  public static let foreignPrefix: [UInt8] = Array("user.appbox.x.".utf8)

  private static let linuxNamespaces: [[UInt8]] = ["user.", "trusted.", "security.", "system."].map { Array($0.utf8) }

  /// Whether `name` starts with one of Linux's xattr namespaces.
  public static func hasLinuxNamespace(_ name: some Collection<UInt8>) -> Bool {
    linuxNamespaces.contains { name.starts(with: $0) }
  }

  /// Whether `name` lies in AppBox's reserved namespace.
  public static func isReserved(_ name: some Collection<UInt8>) -> Bool {
    name.starts(with: reservedPrefix)
  }

  /// The backing name for a name on the mount.
  public static func backingName(forMountName name: some Collection<UInt8>) -> [UInt8] {
    hasLinuxNamespace(name) ? Array(name) : foreignPrefix + name
  }

  /// The mount name for a backing name.
  public static func mountName(forBackingName name: some Collection<UInt8>) -> [UInt8] {
    name.starts(with: foreignPrefix) ? Array(name.dropFirst(foreignPrefix.count)) : Array(name)
  }
}
