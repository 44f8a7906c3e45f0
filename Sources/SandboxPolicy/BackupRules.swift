/// What a device backup of an app holds (docs/reference.md, Backups), and the domain an
/// app's items are in. (How the format names files is AppBoxBackup's `BackupLayout`.)
///
/// A backup holds `Documents/` and `Library/` except `Library/Caches/`, minus every item
/// excluded by Apple's attributes (on the item or any ancestor: a walk does not descend
/// into an excluded directory); never `tmp/`. An App Group's container on a device
/// (domain `AppDomainGroup-<group id>`) is backed up whole but `Library/Caches/` and its
/// metadata file (docs/reference.md#a-device).
public enum BackupRules {
  /// Apple's modern exclusion attribute (`isExcludedFromBackup`): any value excludes.
  public static let modernExclusionName: [UInt8] = Array(BackupExclusion.attributeName.utf8)
  /// The legacy exclusion attribute (iOS 5.0.1): the one byte `0x01` excludes.
  public static let legacyExclusionName: [UInt8] = Array(BackupExclusion.legacyAttributeName.utf8)

  /// Where an item lies, for the backup.
  public enum Scope: Sendable, Equatable {
    /// `Documents/` or `Library/` outside Caches: backed up unless excluded.
    case backedUp
    /// `Library/Caches/`: never backed up.
    case caches
    /// `tmp/`: never backed up.
    case tmp
    /// Anything else (the container root, unknown top-level entries): not the app's data.
    case outside
  }

  /// Which attribute excluded an item.
  public enum Exclusion: String, Sendable, Equatable {
    /// `com.apple.metadata:com_apple_backup_excludeItem`.
    case modern
    /// `com.apple.MobileBackup` = 1.
    case legacy
  }

  /// The scope of a path given as components below the root of a container of `kind`.
  public static func scope(of components: [[UInt8]], in kind: ContainerKind) -> Scope {
    guard kind == .group else { return scope(of: components) }
    guard let top = components.first else { return .outside }
    if components.count == 1, top.elementsEqual(DeviceLayout.metadataFileName) { return .outside }
    if top.elementsEqual("Library".utf8), components.count > 1, components[1].elementsEqual("Caches".utf8) {
      return .caches
    }
    return .backedUp
  }

  /// The scope of a path given as components below an app container's root.
  public static func scope(of components: [[UInt8]]) -> Scope {
    guard let top = components.first else { return .outside }
    if top.elementsEqual("Documents".utf8) { return .backedUp }
    if top.elementsEqual("tmp".utf8) { return .tmp }
    if top.elementsEqual("Library".utf8) {
      if components.count > 1, components[1].elementsEqual("Caches".utf8) { return .caches }
      return .backedUp
    }
    return .outside
  }

  /// The attribute that excludes an item, given its attributes by their names on the
  /// mount (Apple's names, see ``XattrNameMapping``), or nil when it is not excluded.
  public static func exclusion(_ attributes: some Sequence<(name: [UInt8], value: [UInt8])>) -> Exclusion? {
    var legacy = false
    for (name, value) in attributes {
      if name == modernExclusionName { return .modern }
      if name == legacyExclusionName, value == [1] { legacy = true }
    }
    return legacy ? .legacy : nil
  }

  /// The backup domain of an app: `AppDomain-<bundle id>`.
  public static func domain(bundleID: String) -> String { "AppDomain-" + bundleID }

  /// The app's bundle id in a domain name, when it is an app's own domain.
  public static func bundleID(ofDomain domain: String) -> String? {
    domain.hasPrefix("AppDomain-") ? String(domain.dropFirst("AppDomain-".count)) : nil
  }

  /// The backup domain of an App Group's container: `AppDomainGroup-<group id>`.
  public static func groupDomain(groupID: String) -> String { "AppDomainGroup-" + groupID }

  /// The group's id in a domain name, when it is an App Group's domain.
  public static func groupID(ofDomain domain: String) -> String? {
    domain.hasPrefix("AppDomainGroup-") ? String(domain.dropFirst("AppDomainGroup-".count)) : nil
  }

  /// Whether `id` can be a bundle id: letters, digits, `.`, `-`, `_`, not empty, at most 255.
  public static func isValidBundleID(_ id: String) -> Bool {
    !id.isEmpty && id.utf8.count <= 255
      && id.utf8.allSatisfy {
        $0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
      }
  }

  /// The components of a relative path from a backup, when a restore may create it: no
  /// empty, `.` or `..` component, no NUL, and inside the backed-up scope (of a container
  /// of `kind`).
  public static func restorableComponents(_ relativePath: [UInt8], in kind: ContainerKind = .app) -> [[UInt8]]? {
    guard !relativePath.isEmpty, !relativePath.contains(0), relativePath.first != UInt8(ascii: "/") else { return nil }
    let components = relativePath.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(Array.init)
    for component in components where component.isEmpty || component == [0x2E] || component == [0x2E, 0x2E] {
      return nil
    }
    return scope(of: components, in: kind) == .backedUp ? components : nil
  }
}

extension UInt8 {
  /// Whether this byte is an ASCII letter or digit.
  var isASCIIAlphanumeric: Bool {
    (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self)
  }
}
