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

/// What the daemon could learn of a process's ancestry.
public enum Ancestry: Equatable, Sendable {
  /// The process and its ancestors, itself first, up to the oldest, read consistently.
  case known([ProcessIdentity])
  /// It could not be read (the process is gone, `/proc` failed, the chain kept changing or
  /// was deeper than anyone's): why, for the log. Such a process is judged as if it were in
  /// a refusing run.
  case unknown(String)
}

/// The runs of `appbox run` a daemon knows, and whether a process may change the device
/// (lock, unlock, purge, resize): the barrier between a run's program and the device.
///
/// A run is the process that keeps the program's tree (a child subreaper that outlives
/// every process of the tree, so nothing in it is ever re-parented out of it). A process
/// is refused when a refusing run is its ancestor; the run's own process is not. Only
/// refusing runs are recorded, and only when no recorded run refuses the registering
/// process already: a run that allows device control can never refuse anything, and a
/// run nested in a refusing one is covered by it (its keeper outlives the nested tree).
/// So a program under a refusing run adds nothing here, however many processes it
/// registers, and the set holds one run per live keeper outside any refusing run: it
/// is bounded by the processes the kernel lets the owner have, not by a table that can
/// be filled to turn others away.
public struct DeviceControlRuns: Sendable {
  /// What ``decide(_:)`` answers.
  public enum Decision: Equatable, Sendable {
    /// The process may change the device.
    case allowed
    /// The process is in the run of this keeper, which does not allow it.
    case refused(run: Int32)
    /// Runs are recorded and the process's ancestry could not be read: refused (fails
    /// closed), for this reason.
    case unverifiable(String)
  }

  /// What ``register(_:ancestry:allowsControl:)`` did.
  public enum Registration: Equatable, Sendable {
    /// Recorded: its descendants are refused from now on.
    case recorded
    /// Nothing to record: the run allows device control, so it refuses nothing.
    case allowsControl
    /// Nothing to record: a recorded run refuses the process and all it starts already.
    case coveredBy(run: Int32)
  }

  /// The fewest recorded runs at which ``needsPruning`` asks for gone ones to be forgotten.
  public static let minimumPruneSize = 64

  /// The recorded refusing runs (their keepers).
  public private(set) var runs: Set<ProcessIdentity> = []
  /// ``needsPruning`` from this count on: twice the count after the last pruning, so the
  /// pruning's reads of `/proc` are constant per registration on average.
  private var pruneAt = Self.minimumPruneSize

  /// No runs.
  public init() {}

  /// Whether no run is recorded (then every process may change the device).
  public var isEmpty: Bool { runs.isEmpty }

  /// Registers `process` as a run (a keeper) whose ancestry is `ancestry`. A process whose
  /// ancestry cannot be read is recorded (the cautious side: a record only ever refuses).
  public mutating func register(_ process: ProcessIdentity, ancestry: Ancestry, allowsControl: Bool)
    -> Registration
  {
    if allowsControl { return .allowsControl }
    if case .known(let chain) = ancestry, case .refused(let run) = decide(.known(chain)) {
      return .coveredBy(run: run)
    }
    runs.insert(process)
    return .recorded
  }

  /// Whether the process whose ancestry is `ancestry` may change the device: not when a
  /// recorded run is one of its ancestors, nor, while any run is recorded, when its
  /// ancestry is unknown.
  public func decide(_ ancestry: Ancestry) -> Decision {
    guard !runs.isEmpty else { return .allowed }
    switch ancestry {
    case .known(let chain):
      for process in chain.dropFirst() where runs.contains(process) { return .refused(run: process.pid) }
      return .allowed
    case .unknown(let reason):
      return .unverifiable(reason)
    }
  }

  /// Whether enough runs are recorded that the gone ones should be looked for and
  /// forgotten (``forget(_:)``). A gone run kept changes no decision on a process whose
  /// ancestry is known (a later process with its pid has another start time); it costs
  /// memory, and keeps an unverifiable process refused.
  public var needsPruning: Bool { runs.count >= pruneAt }

  /// Forgets the runs in `gone` (their processes have exited) and sets when the next
  /// pruning is due.
  public mutating func forget(_ gone: Set<ProcessIdentity>) {
    runs.subtract(gone)
    pruneAt = max(Self.minimumPruneSize, 2 * runs.count)
  }
}
