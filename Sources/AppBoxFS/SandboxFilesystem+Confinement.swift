import AppBoxEvents
import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - A device's app confinement (docs/architecture.md#app-confinement)
//
// A program of a run of `appbox run --app` (and everything it starts) reaches its app's
// container and its groups' containers; any other container is EPERM, whether it exists
// or not. What is checked: the lookup of a name in a directory of containers (whose
// entries the kernel never caches: their timeout is 0, so every path walk through one asks
// here), the listing of those directories, and every request that uses or changes an item
// in a container without an open handle (opens, creates, removals, renames, links,
// `setattr`, `readlink`, extended attributes, `access`). Not checked: `getattr` (the
// kernel sends it for `fstat` of a descriptor without the handle, and answers `stat`
// from its cache anyway: attributes of an item a program already holds) and requests on
// open handles (read, write, readdir, release…): a descriptor is a capability, as on iOS. A request under
// `Containers/` that comes with pid 0 (from another pid namespace, where the daemon
// cannot tell who sent it) is refused on every device, run or not.

extension SandboxFilesystem {
  /// Refuses (EPERM, counted, logged once per key) a request about `inode` from a process
  /// that may not reach `inode`'s container.
  @inline(__always)
  func checkReach(_ ctx: Caller, _ inode: Inode, _ operation: StaticString) throws(Errno) {
    guard device != nil, inode.container != .top else { return }
    try checkReach(ctx, inode.container, operation) { mountPath(of: inode) }
  }

  /// Refuses a lookup of `name` in a directory of containers (`Containers/Data/Application/`,
  /// `Containers/Shared/AppGroup/`) by a process that may not reach that container: the
  /// same EPERM whether it exists or not, so a confined program learns nothing of other apps.
  func checkReach(_ ctx: Caller, lookingUp name: FileName, in directory: Inode) throws(Errno) {
    guard let device, case .device(let place) = directory.layout, let kind = place.containerKind else { return }
    let number = device.number(of: kind, named: name)
    try checkReach(ctx, number, "lookup") { mountPath(of: name, in: directory) }
  }

  /// Refuses listing a directory of containers to a confined program (on iOS an app cannot
  /// list the other apps' containers either).
  func checkListing(_ ctx: Caller, _ directory: Inode) throws(Errno) {
    guard device != nil, case .device(let place) = directory.layout, place.containerKind != nil else { return }
    try checkReach(ctx, nil, "opendir") { mountPath(of: directory) }
  }

  /// The decision: `container` nil means none the program may have (an unknown name, or a
  /// directory of containers).
  private func checkReach(
    _ ctx: Caller, _ container: ContainerNumber?, _ operation: StaticString, path: () -> [UInt8]
  ) throws(Errno) {
    if ctx.pid == 0 { try refuse(.noProcess, app: nil, container, operation, path) }
    guard let runs = confinement.membership, runs.hasRuns else { return }
    let run: RunAccess?
    do throws(Errno) { run = try runs.run(of: ctx.pid) } catch {
      try refuse(.unverifiable, app: nil, container, operation, path)
    }
    guard let run else { return }
    if let container, run.reachable.contains(container) { return }
    try refuse(.otherContainer, app: run.app.name, container, operation, path)
  }

  /// What a run of `app` may reach (its container and its groups'); nil on a plain mount
  /// or when `app` is not installed.
  public func access(for app: ContainerIdentifier) -> RunAccess? {
    guard let reachable = device?.reachable(by: app), !reachable.isEmpty else { return nil }
    return RunAccess(app: app, reachable: reachable)
  }

  private func refuse(
    _ reason: ConfinementEvent.Reason, app: String?, _ container: ContainerNumber?, _ operation: StaticString,
    _ path: () -> [UInt8]
  ) throws(Errno) -> Never {
    let event = ConfinementEvent(
      time: Clock.unix(), pathBytes: path(), reason: reason, app: app, container: container.flatMap(containerName),
      operation: "\(operation)")
    if confinement.count(event) { events.record(.confinement(event)) }
    throw .notPermitted
  }

  /// The status's `confinement` object: whether runs are confined, refusals by reason.
  func confinementJSON() -> String {
    let refusals = confinement.refusals
    let byReason = ConfinementEvent.Reason.allCases.map { "\"\($0.rawValue)\":\(refusals[$0] ?? 0)" }
    let total = refusals.values.reduce(0, +)
    return "{\"enforced\":\(confinement.membership != nil),\"refusals\":\(total),\"byReason\":{"
      + byReason.joined(separator: ",") + "}}"
  }
}
