/// The apps installed on a device and their App Groups (docs/reference.md#a-device): what
/// `appbox app install` and `appbox app remove` may do, decided before anything changes.
///
/// A group exists while at least one installed app is a member, as on iOS: installing an
/// app creates the groups it names that do not exist yet, removing an app removes the
/// groups it was the last member of. An id names an app or a group, never both.
public struct DeviceApps: Equatable, Sendable {
  /// Each installed app and the groups it is a member of (sorted).
  public private(set) var apps: [ContainerIdentifier: [ContainerIdentifier]] = [:]

  /// Why a change is refused.
  public enum Refusal: Error, Equatable, Sendable, CustomStringConvertible {
    /// The app is installed already.
    case alreadyInstalled(ContainerIdentifier)
    /// No app with this bundle id is installed.
    case notInstalled(ContainerIdentifier)
    /// The id is an installed app's, so it cannot name a group.
    case groupIsAnApp(ContainerIdentifier)
    /// The id is an existing group's, so it cannot name an app.
    case appIsAGroup(ContainerIdentifier)
    /// The app names itself as one of its groups.
    case groupIsTheApp(ContainerIdentifier)

    public var description: String {
      switch self {
      case .alreadyInstalled(let id): "\(id) is installed already"
      case .notInstalled(let id): "no app \(id) is installed"
      case .groupIsAnApp(let id): "\(id) is an installed app's bundle id, not an App Group's"
      case .appIsAGroup(let id): "\(id) is an App Group's id, not a bundle id"
      case .groupIsTheApp(let id): "the group \(id) has the app's own bundle id"
      }
    }
  }

  /// An empty device.
  public init() {}

  /// Every group with at least one member, and its members (sorted).
  public var groups: [ContainerIdentifier: [ContainerIdentifier]] {
    var members: [ContainerIdentifier: [ContainerIdentifier]] = [:]
    for (app, groups) in apps {
      for group in groups { members[group, default: []].append(app) }
    }
    return members.mapValues { $0.sorted() }
  }

  /// Whether `id` is an installed app.
  public func isInstalled(_ id: ContainerIdentifier) -> Bool { apps[id] != nil }

  /// Installs `app` as a member of `groups` (repeats count once).
  /// - Returns: the groups this creates (those no installed app named yet), sorted.
  /// - Throws: ``Refusal`` when the app is installed already, or an id would name both an
  ///   app and a group; nothing changes then.
  @discardableResult
  public mutating func install(_ app: ContainerIdentifier, groups: [ContainerIdentifier]) throws(Refusal)
    -> [ContainerIdentifier]
  {
    guard apps[app] == nil else { throw .alreadyInstalled(app) }
    let existing = self.groups
    if existing[app] != nil { throw .appIsAGroup(app) }
    let wanted = Array(Set(groups)).sorted()
    for group in wanted {
      if group == app { throw .groupIsTheApp(group) }
      if apps[group] != nil { throw .groupIsAnApp(group) }
    }
    apps[app] = wanted
    return wanted.filter { existing[$0] == nil }
  }

  /// Removes `app`.
  /// - Returns: the groups it was the last member of, which go with it, sorted.
  /// - Throws: ``Refusal/notInstalled(_:)``; nothing changes then.
  @discardableResult
  public mutating func remove(_ app: ContainerIdentifier) throws(Refusal) -> [ContainerIdentifier] {
    guard let groups = apps.removeValue(forKey: app) else { throw .notInstalled(app) }
    let remaining = self.groups
    return groups.filter { remaining[$0] == nil }
  }
}
