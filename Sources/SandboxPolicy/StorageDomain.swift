/// The part of the app container a path belongs to, which decides whether it is backed up
/// and whether it may be purged (docs/reference.md#layout).
public enum StorageDomain: UInt8, CaseIterable, Hashable, Sendable, CustomStringConvertible {
  /// `Documents/`: user-created data; backed up, never purged.
  case documents = 0
  /// `Library/Application Support/`: app-generated support files; backed up, never purged.
  case applicationSupport = 1
  /// `Library/Preferences/`: settings; backed up, never purged.
  case preferences = 2
  /// `Library/Caches/`: re-creatable data; not backed up, purged under pressure.
  case caches = 3
  /// `tmp/`: scratch files; not backed up, purged first.
  case tmp = 4
  /// Anything else below `Library/` (and `Library` itself); backed up, never purged.
  case library = 5
  /// The mount root itself and anything at the top level that is not a known domain.
  case root = 6

  /// The purgeable domains in the order they are purged: `tmp` first, then `caches`.
  public static let purgeOrder: [StorageDomain] = [.tmp, .caches]

  /// Whether files in this domain may be purged (only `caches` and `tmp`).
  public var isPurgeable: Bool { self == .caches || self == .tmp }

  /// The position of this domain in `purgeOrder` (0 for `tmp`, 1 for `caches`), or nil for
  /// domains that are never purged.
  public var purgeRank: Int? {
    switch self {
    case .tmp: return 0
    case .caches: return 1
    default: return nil
    }
  }

  /// Whether files in this domain are included in backups (all but `caches` and `tmp`).
  public var isBackedUp: Bool { !isPurgeable }

  /// The human name, as in Apple's documentation: `Documents`, `Application Support`,
  /// `Preferences`, `Caches`, `tmp`, `Library`, `root`.
  public var name: String {
    switch self {
    case .documents: return "Documents"
    case .applicationSupport: return "Application Support"
    case .preferences: return "Preferences"
    case .caches: return "Caches"
    case .tmp: return "tmp"
    case .library: return "Library"
    case .root: return "root"
    }
  }

  /// The short machine name used in JSON and on the command line: `documents`,
  /// `applicationSupport`, `preferences`, `caches`, `tmp`, `library`, `root`.
  public var machineName: String {
    switch self {
    case .documents: return "documents"
    case .applicationSupport: return "applicationSupport"
    case .preferences: return "preferences"
    case .caches: return "caches"
    case .tmp: return "tmp"
    case .library: return "library"
    case .root: return "root"
    }
  }

  /// The domain with a given machine name.
  /// - Parameter machineName: A `machineName` such as `caches`.
  public init?(machineName: String) {
    guard let domain = Self.allCases.first(where: { $0.machineName == machineName }) else {
      return nil
    }
    self = domain
  }

  /// The machine name.
  public var description: String { machineName }

  /// The path components of this domain's top directory below the mount root, e.g.
  /// `["Library", "Caches"]`; empty for `root`.
  public var rootComponents: [[UInt8]] {
    switch self {
    case .documents: return [Self.documentsName]
    case .applicationSupport: return [Self.libraryName, Self.applicationSupportName]
    case .preferences: return [Self.libraryName, Self.preferencesName]
    case .caches: return [Self.libraryName, Self.cachesName]
    case .tmp: return [Self.tmpName]
    case .library: return [Self.libraryName]
    case .root: return []
    }
  }

  /// Classifies a path below the mount root.
  ///
  /// Names compare as exact bytes (Linux names are case-sensitive). The domain's own top
  /// directory belongs to the domain: `["Library", "Caches"]` is `caches`, `["Library"]` is
  /// `library`, `[]` is `root`.
  /// - Parameter components: The path's components from the mount root, e.g.
  ///   `["Library", "Caches", "x"]`.
  /// - Returns: The domain the path belongs to.
  public static func classify<C: Collection>(components: C) -> StorageDomain
  where C.Element: Collection, C.Element.Element == UInt8 {
    guard let first = components.first else { return .root }
    if first.elementsEqual(documentsName) { return .documents }
    if first.elementsEqual(tmpName) { return .tmp }
    guard first.elementsEqual(libraryName) else { return .root }
    let rest = components.dropFirst()
    guard let second = rest.first else { return .library }
    if second.elementsEqual(cachesName) { return .caches }
    if second.elementsEqual(applicationSupportName) { return .applicationSupport }
    if second.elementsEqual(preferencesName) { return .preferences }
    return .library
  }

  private static let documentsName = Array("Documents".utf8)
  private static let libraryName = Array("Library".utf8)
  private static let cachesName = Array("Caches".utf8)
  private static let applicationSupportName = Array("Application Support".utf8)
  private static let preferencesName = Array("Preferences".utf8)
  private static let tmpName = Array("tmp".utf8)
}
