/// One process, named so that a later process reusing its pid is another one.
public struct ProcessIdentity: Hashable, Sendable, CustomStringConvertible {
  /// The process id.
  public var pid: Int32
  /// When it started (clock ticks after boot, `/proc/PID/stat` field 22).
  public var startTime: UInt64

  /// Creates an identity.
  public init(pid: Int32, startTime: UInt64) {
    self.pid = pid
    self.startTime = startTime
  }

  public var description: String { "\(pid)" }
}

/// The runs of `appbox run` a daemon knows, and whether a process may change the device
/// (lock, unlock, purge, resize): the barrier between a run's program and the device.
///
/// A run registers its own process (a child subreaper, so its program's descendants stay
/// in its tree). A process is refused when a run that does not allow device control is
/// its ancestor; the run's own process is not (it only reads the status). When a run ends
/// with descendants still running, each of them is registered as a *member*, refused
/// itself as well, since it will be re-parented out of the tree.
public struct DeviceControlRuns: Sendable {
  /// What is known of one registered process.
  public struct Entry: Hashable, Sendable {
    /// Whether its run allows device control (`--allow-device-control`).
    public var allowsControl: Bool
    /// Whether the process itself is in the run (a member left behind), not only its
    /// descendants (the run's own `appbox run` process).
    public var coversItself: Bool
    /// The `appbox run` process of the run.
    public var run: Int32

    /// Creates an entry.
    public init(allowsControl: Bool, coversItself: Bool, run: Int32) {
      self.allowsControl = allowsControl
      self.coversItself = coversItself
      self.run = run
    }
  }

  /// What ``decide(_:)`` answers.
  public enum Decision: Equatable, Sendable {
    /// The process may change the device.
    case allowed
    /// The process is in the run of this `appbox run` process, which does not allow it.
    case refused(run: Int32)
  }

  /// The most processes registered at once; more are refused (a client cannot grow the
  /// daemon's memory without bound).
  public static let maximumEntries = 4096

  /// The registered processes.
  public private(set) var entries: [ProcessIdentity: Entry] = [:]

  /// No runs.
  public init() {}

  /// Registers `process`.
  /// - Returns: false when ``maximumEntries`` are registered already.
  @discardableResult
  public mutating func register(_ process: ProcessIdentity, _ entry: Entry) -> Bool {
    guard entries[process] != nil || entries.count < Self.maximumEntries else { return false }
    entries[process] = entry
    return true
  }

  /// Forgets `process`.
  public mutating func remove(_ process: ProcessIdentity) { entries[process] = nil }

  /// Forgets every process for which `isGone` is true.
  public mutating func removeAll(where isGone: (ProcessIdentity) -> Bool) {
    entries = entries.filter { !isGone($0.key) }
  }

  /// Whether no process is registered (then every process may change the device).
  public var isEmpty: Bool { entries.isEmpty }

  /// Whether the process whose ancestry is `chain` (itself first, then its parent, up to
  /// the oldest ancestor) may change the device: not if a run that does not allow it is
  /// an ancestor, or the process is a member of one. With nested runs, a refusing run
  /// anywhere above wins.
  public func decide(_ chain: [ProcessIdentity]) -> Decision {
    for (depth, process) in chain.enumerated() {
      guard let entry = entries[process], !entry.allowsControl, depth > 0 || entry.coversItself else { continue }
      return .refused(run: entry.run)
    }
    return .allowed
  }

  /// The processes of `all` (each with its ancestry, itself first) that descend from
  /// `run`: the members a run leaves behind when it ends.
  public static func descendants(of run: ProcessIdentity, among all: [[ProcessIdentity]]) -> [ProcessIdentity] {
    all.compactMap { chain in
      guard let process = chain.first, process != run, chain.dropFirst().contains(run) else { return nil }
      return process
    }
  }
}
