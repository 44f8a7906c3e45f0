/// The fixed directories of an app container (docs/reference.md#layout), and of a device's App Group
/// containers and its own directories (``DeviceLayout``): created at mount, never removed
/// or renamed through the mount.
public enum SandboxLayout {
  /// A fixed directory of a container.
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

    /// What the layout calls this directory, in a container of `kind`: `Library` is
    /// ``Parent/library`` or ``Parent/groupLibrary``, the others are the user's.
    public func place(in kind: ContainerKind) -> Parent {
      guard self == .library else { return .other }
      return kind == .app ? .library : .groupLibrary
    }

    /// The path below the container root, for messages and the CLI.
    public var path: String { components.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/") }
  }

  /// An app container's fixed directories in creation order (parents first).
  public static let creationOrder: [FixedDirectory] = [
    .documents, .library, .applicationSupport, .preferences, .caches, .tmp,
  ]

  /// What kind of directory a name is looked up in, as far as the layout cares.
  public enum Parent: Hashable, Sendable {
    /// An app container's root: a plain mount's root, or a device's
    /// `Containers/Data/Application/<bundle id>/`.
    case root
    /// An app container's `Library/`.
    case library
    /// An App Group container's root: the group's own files, and `Library/`.
    case groupRoot
    /// An App Group container's `Library/`: `Caches/`, `Preferences/` and the group's own.
    case groupLibrary
    /// One of a device's own directories (its root, `Containers/`, …).
    case device(DeviceLayout.Directory)
    /// Any other directory: everything there is the user's.
    case other
  }

  /// The fixed directory `name` denotes inside `parent`, if any.
  public static func fixedDirectory(named name: some Collection<UInt8>, in parent: Parent) -> FixedDirectory? {
    let candidates: [FixedDirectory]
    switch parent {
    case .root: candidates = [.documents, .library, .tmp]
    case .library: candidates = [.applicationSupport, .preferences, .caches]
    case .groupRoot: candidates = [.library]
    case .groupLibrary: candidates = [.preferences, .caches]
    case .device, .other: return nil
    }
    return candidates.first { name.elementsEqual($0.components.last!) }
  }

  /// What the entry `name` of a directory at `parent` is: its own place (a directory's
  /// names follow that), and whether the layout made it (a fixed directory, a device's
  /// directory, a container, a container's metadata file) rather than a program.
  public static func entry(named name: some Collection<UInt8>, in parent: Parent, isDirectory: Bool) -> (
    place: Parent, isLayout: Bool
  ) {
    switch parent {
    case .other:
      return (.other, false)
    case .device(let directory):
      if let kind = directory.containerKind { return isDirectory ? (kind.rootPlace, true) : (.other, false) }
      if isDirectory, let child = directory.child(named: name) { return (.device(child), true) }
      return (.other, false)
    case .root, .library, .groupRoot, .groupLibrary:
      if isDirectory, let fixed = fixedDirectory(named: name, in: parent) {
        return (fixed.place(in: parent == .root || parent == .library ? .app : .group), true)
      }
      let metadata =
        !isDirectory && (parent == .root || parent == .groupRoot) && name.elementsEqual(DeviceLayout.metadataFileName)
      return (.other, metadata)
    }
  }

  /// Whether a new entry may be created directly in `parent`. An app container's root holds
  /// only the fixed directories, as on iOS where an app cannot write its container's root;
  /// a device's own directories take nothing from programs (containers come and go only by
  /// `appbox app`).
  public static func allowsNewEntries(in parent: Parent) -> Bool {
    switch parent {
    case .root, .device: false
    case .library, .groupRoot, .groupLibrary, .other: true
    }
  }

  /// Whether the entry `name` in `parent` may be removed, renamed, or replaced: not a
  /// fixed directory, not a container's metadata file, nothing in a device's own
  /// directories.
  public static func allowsRemoval(of name: some Collection<UInt8>, in parent: Parent) -> Bool {
    switch parent {
    case .device: false
    case .root, .groupRoot:
      fixedDirectory(named: name, in: parent) == nil && !name.elementsEqual(DeviceLayout.metadataFileName)
    case .library, .groupLibrary, .other: fixedDirectory(named: name, in: parent) == nil
    }
  }
}
