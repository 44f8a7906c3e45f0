import SandboxPolicy
import Synchronization

/// A device mount's containers (docs/reference.md#a-device): each container's number,
/// id and kind, and the installed apps with their groups (``DeviceApps``, which decides
/// what `appbox app` may change). Read from the containers' metadata files at mount
/// (``DeviceBacking``); changed only by `appbox app install` and `remove`.
final class DeviceContainers: Sendable {
  /// One container.
  struct Container: Hashable, Sendable {
    let id: ContainerIdentifier
    let kind: ContainerKind

    /// Its root below the device root.
    var components: [[UInt8]] { DeviceLayout.components(of: kind, id) }
  }

  private struct State: Sendable {
    var apps = DeviceApps()
    var containers: [ContainerNumber: Container] = [:]
    var numbers: [ContainerKind: [ContainerIdentifier: ContainerNumber]] = [.app: [:], .group: [:]]
    var next: UInt32 = 1
  }

  /// Lock order: a leaf; never held across a syscall.
  private let state = Mutex(State())

  /// A device's registry with the apps and groups found at mount (checked consistent by
  /// ``DeviceBacking``): containers are numbered apps first, then groups, each sorted.
  init(apps: DeviceApps) {
    state.withLock { state in
      state.apps = apps
      for app in apps.apps.keys.sorted() { _ = Self.add(Container(id: app, kind: .app), to: &state) }
      for group in apps.groups.keys.sorted() { _ = Self.add(Container(id: group, kind: .group), to: &state) }
    }
  }

  private static func add(_ container: Container, to state: inout State) -> ContainerNumber {
    let number = ContainerNumber(rawValue: state.next)
    state.next += 1
    state.containers[number] = container
    state.numbers[container.kind]![container.id] = number
    return number
  }

  /// The container of `kind` named `name`, if it is on the device.
  func number(of kind: ContainerKind, named name: some Collection<UInt8>) -> ContainerNumber? {
    guard let id = ContainerIdentifier(bytes: name) else { return nil }
    return state.withLock { $0.numbers[kind]![id] }
  }

  /// The container of `kind` with `id`, if it is on the device.
  func number(of kind: ContainerKind, _ id: ContainerIdentifier) -> ContainerNumber? {
    state.withLock { $0.numbers[kind]![id] }
  }

  /// The container numbered `number`, if it is on the device.
  func container(_ number: ContainerNumber) -> Container? {
    state.withLock { $0.containers[number] }
  }

  /// Every container, by number.
  var all: [ContainerNumber: Container] { state.withLock { $0.containers } }

  /// The apps and their groups.
  var apps: DeviceApps { state.withLock { $0.apps } }

  /// Decides an install without making it.
  /// - Returns: the groups it would create.
  func planInstall(_ app: ContainerIdentifier, groups: [ContainerIdentifier]) throws(DeviceApps.Refusal)
    -> [ContainerIdentifier]
  {
    var apps = self.apps
    return try apps.install(app, groups: groups)
  }

  /// Records an installed app (its groups already created by ``addGroup(_:)``).
  /// - Returns: its container's number.
  func install(_ app: ContainerIdentifier, groups: [ContainerIdentifier]) throws(DeviceApps.Refusal) -> ContainerNumber
  {
    try state.withLock { (state) throws(DeviceApps.Refusal) -> ContainerNumber in
      try state.apps.install(app, groups: groups)
      return Self.add(Container(id: app, kind: .app), to: &state)
    }
  }

  /// Records a new group container (before the app that names it).
  func addGroup(_ group: ContainerIdentifier) -> ContainerNumber {
    state.withLock { state in
      if let existing = state.numbers[.group]![group] { return existing }
      return Self.add(Container(id: group, kind: .group), to: &state)
    }
  }

  /// Removes `app` from the apps (its container and the groups it was the last member of
  /// are no longer found by name; their numbers are never given out again).
  /// - Returns: its container's number, and the groups that go with it.
  func remove(_ app: ContainerIdentifier) throws(DeviceApps.Refusal) -> (
    app: ContainerNumber, groups: [(ContainerIdentifier, ContainerNumber)]
  ) {
    try state.withLock { (state) throws(DeviceApps.Refusal) in
      let orphans = try state.apps.remove(app)
      let number = state.numbers[.app]!.removeValue(forKey: app)!
      state.containers[number] = nil
      let groups = orphans.map { group in
        let groupNumber = state.numbers[.group]!.removeValue(forKey: group)!
        state.containers[groupNumber] = nil
        return (group, groupNumber)
      }
      return (number, groups)
    }
  }

  /// Forgets a container an install registered and could not finish (an app also leaves
  /// the apps). Its number is never given out again.
  func discard(_ number: ContainerNumber) {
    state.withLock { state in
      guard let container = state.containers.removeValue(forKey: number) else { return }
      state.numbers[container.kind]![container.id] = nil
      if container.kind == .app {
        do throws(DeviceApps.Refusal) { try state.apps.remove(container.id) } catch {
          // Registered with the container: an app without its entry was never installed.
        }
      }
    }
  }

  /// Decides a removal without making it.
  /// - Returns: the groups that would go with the app.
  func planRemove(_ app: ContainerIdentifier) throws(DeviceApps.Refusal) -> [ContainerIdentifier] {
    var apps = self.apps
    return try apps.remove(app)
  }
}

extension DeviceContainers {
  /// The containers a program running as `app` may use: its own and its groups'. Empty
  /// when `app` is not installed.
  func reachable(by app: ContainerIdentifier) -> Set<ContainerNumber> {
    state.withLock { state in
      guard let own = state.numbers[.app]![app] else { return [] }
      var numbers: Set<ContainerNumber> = [own]
      for group in state.apps.apps[app] ?? [] {
        if let number = state.numbers[.group]![group] { numbers.insert(number) }
      }
      return numbers
    }
  }
}
