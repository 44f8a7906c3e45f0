/// The layout of a device mount (docs/reference.md#a-device): below its root,
/// `Containers/Data/Application/<bundle id>/` holds each app's container (the layout of
/// ``SandboxLayout``) and `Containers/Shared/AppGroup/<group id>/` each App Group's (files
/// at its root, `Library/`, `Library/Caches/`, `Library/Preferences/`). Each container
/// holds iOS's metadata plist naming its id (``ContainerMetadata``).
public enum DeviceLayout {
  /// A directory of the device's own, above the containers: created at mount, never
  /// removed or renamed, taking no entries from programs.
  public enum Directory: UInt8, CaseIterable, Sendable {
    /// The mount's root: holds `Containers`.
    case root
    /// `Containers/`: holds `Data` and `Shared`.
    case containers
    /// `Containers/Data/`: holds `Application`.
    case data
    /// `Containers/Shared/`: holds `AppGroup`.
    case shared
    /// `Containers/Data/Application/`: the apps' containers.
    case applications
    /// `Containers/Shared/AppGroup/`: the App Groups' containers.
    case appGroups

    /// Its path components below the device root.
    public var components: [[UInt8]] {
      switch self {
      case .root: []
      case .containers: [DeviceLayout.containersName]
      case .data: [DeviceLayout.containersName, DeviceLayout.dataName]
      case .shared: [DeviceLayout.containersName, DeviceLayout.sharedName]
      case .applications: ContainerKind.app.parentComponents
      case .appGroups: ContainerKind.group.parentComponents
      }
    }

    /// The directory `name` denotes inside this one, if the layout has one there.
    public func child(named name: some Collection<UInt8>) -> Directory? {
      switch self {
      case .root: name.elementsEqual(DeviceLayout.containersName) ? .containers : nil
      case .containers:
        name.elementsEqual(DeviceLayout.dataName)
          ? .data : name.elementsEqual(DeviceLayout.sharedName) ? .shared : nil
      case .data: name.elementsEqual(DeviceLayout.applicationName) ? .applications : nil
      case .shared: name.elementsEqual(DeviceLayout.appGroupName) ? .appGroups : nil
      case .applications, .appGroups: nil
      }
    }

    /// The kind of container each entry of this directory is, for the two directories
    /// of containers.
    public var containerKind: ContainerKind? {
      switch self {
      case .applications: .app
      case .appGroups: .group
      default: nil
      }
    }
  }

  /// The device's directories, parents first.
  public static let creationOrder: [Directory] = [.containers, .data, .shared, .applications, .appGroups]

  /// iOS's name for the file that identifies a container.
  public static let metadataFileName = Array(".com.apple.mobile_container_manager.metadata.plist".utf8)

  /// The prefix of the names AppBox stages containers under while it installs or removes
  /// them (hidden on the mount; no id starts with a dot).
  public static let stagingPrefix = Array(".appbox-".utf8)

  /// Whether `name`, in a directory of containers, is one of AppBox's staging names.
  public static func isStaging(_ name: some Collection<UInt8>) -> Bool {
    name.starts(with: stagingPrefix)
  }

  /// The name a container is staged under while it is installed.
  public static func installingName(_ id: ContainerIdentifier) -> [UInt8] {
    stagingPrefix + Array("installing-".utf8) + id.bytes
  }

  /// The name a container is renamed to when it is removed, before its files go.
  public static func removingName(_ id: ContainerIdentifier, serial: UInt64) -> [UInt8] {
    stagingPrefix + Array("removing-\(serial)-".utf8) + id.bytes
  }

  /// The most bytes a staging name puts in front of an id: `.appbox-removing-`, the
  /// largest removal number (20 digits) and `-` (`.appbox-installing-` is shorter).
  /// ``ContainerIdentifier/maximumLength`` leaves room for it in a file name.
  public static let longestStagingPrefix = stagingPrefix.count + "removing-\(UInt64.max)-".utf8.count

  /// The path components of a container's root below the device root.
  public static func components(of kind: ContainerKind, _ id: ContainerIdentifier) -> [[UInt8]] {
    kind.parentComponents + [id.bytes]
  }

  /// Where a path below a device's root belongs: the container it is in (nil for the
  /// device's own directories and anything beside them) and its storage domain there.
  /// - Parameter components: The path's components from the device root.
  public static func classify<C: Collection>(components: C) -> (
    container: (ContainerKind, [UInt8])?, domain: StorageDomain
  )
  where C.Element: Collection, C.Element.Element == UInt8 {
    var directory = Directory.root
    var rest = components[...]
    while let first = rest.first {
      if let kind = directory.containerKind {
        let inside = Array(rest.dropFirst())
        return ((kind, Array(first)), kind.classify(components: inside))
      }
      guard let next = directory.child(named: first) else { return (nil, .root) }
      directory = next
      rest = rest.dropFirst()
    }
    return (nil, .root)
  }

  static let containersName = Array("Containers".utf8)
  static let dataName = Array("Data".utf8)
  static let sharedName = Array("Shared".utf8)
  static let applicationName = Array("Application".utf8)
  static let appGroupName = Array("AppGroup".utf8)
}

/// The two kinds of container on a device.
public enum ContainerKind: UInt8, CaseIterable, Sendable, CustomStringConvertible {
  /// An app's data container: the layout of a plain mount.
  case app
  /// An App Group's container, shared by its member apps: files at its root, `Library/`,
  /// `Library/Caches/`, `Library/Preferences/`.
  case group

  /// `app` or `group`, as status and events name it.
  public var description: String { self == .app ? "app" : "group" }

  /// The directory that holds containers of this kind, below the device root.
  public var parentComponents: [[UInt8]] {
    switch self {
    case .app: [DeviceLayout.containersName, DeviceLayout.dataName, DeviceLayout.applicationName]
    case .group: [DeviceLayout.containersName, DeviceLayout.sharedName, DeviceLayout.appGroupName]
    }
  }

  /// What the layout calls a container root of this kind.
  public var rootPlace: SandboxLayout.Parent { self == .app ? .root : .groupRoot }

  /// Its fixed directories, parents first.
  public var fixedDirectories: [SandboxLayout.FixedDirectory] {
    switch self {
    case .app: SandboxLayout.creationOrder
    case .group: [.library, .preferences, .caches]
    }
  }

  /// iOS's `MCMMetadataContentClass` for such a container: 2 for an app's data
  /// container, 7 for an App Group's.
  public var contentClass: Int64 { self == .app ? 2 : 7 }

  /// The domain of a path below a container of this kind, from its root.
  public func classify<C: Collection>(components: C) -> StorageDomain
  where C.Element: Collection, C.Element.Element == UInt8 {
    var place = rootPlace
    var domain = StorageDomain.root
    for component in components {
      guard let fixed = SandboxLayout.fixedDirectory(named: component, in: place) else { return domain }
      domain = fixed.domain
      place = fixed.place(in: self)
    }
    return domain
  }
}
