/// The fixed directories of an app container (SPEC §1): created at mount, never removed
/// or renamed through the mount.
public enum SandboxLayout {
  /// A fixed directory of the container.
  public enum FixedDirectory: CaseIterable, Sendable {
    case documents, library, applicationSupport, preferences, caches, tmp

    /// The storage domain this directory roots.
    public var domain: StorageDomain {
      switch self {
      case .documents: .documents
      case .library: .library
      case .applicationSupport: .applicationSupport
      case .preferences: .preferences
      case .caches: .caches
      case .tmp: .tmp
      }
    }

    /// Path components below the container root (the domain's, spelled once there).
    public var components: [[UInt8]] { domain.rootComponents }

    /// The directory it sits in.
    var parent: Parent { components.count == 1 ? .root : .library }

    /// The path below the container root, for messages and the CLI.
    public var path: String { components.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/") }
  }

  /// The fixed directories in creation order (parents first).
  public static let creationOrder: [FixedDirectory] = [
    .documents, .library, .applicationSupport, .preferences, .caches, .tmp,
  ]

  /// What kind of directory a name is looked up in, as far as the layout cares.
  public enum Parent: Sendable {
    /// The container root.
    case root
    /// `Library/`.
    case library
    /// Any other directory: everything there is the user's.
    case other
  }

  /// The fixed directory `name` denotes inside `parent`, if any.
  public static func fixedDirectory(named name: some Collection<UInt8>, in parent: Parent) -> FixedDirectory? {
    guard parent != .other else { return nil }
    return FixedDirectory.allCases.first { $0.parent == parent && name.elementsEqual($0.components.last!) }
  }

  /// Whether a new entry may be created directly in `parent`. The container root holds
  /// only the fixed directories, as on iOS where an app cannot write its container's root.
  public static func allowsNewEntries(in parent: Parent) -> Bool { parent != .root }

  /// Whether the entry `name` in `parent` may be removed, renamed, or replaced.
  public static func allowsRemoval(of name: some Collection<UInt8>, in parent: Parent) -> Bool {
    fixedDirectory(named: name, in: parent) == nil
  }
}
