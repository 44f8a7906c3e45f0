/// How the control channel's connections are shared, so that the programs of refusing runs
/// (``DeviceControlRuns``) cannot hold them all and turn away the user's own commands and
/// new runs: connections from inside refusing runs (or of processes whose ancestry could
/// not be read) hold at most ``confinedLimit`` at once, those of one run at most
/// ``perRunLimit``. The server's own limit on all connections leaves the rest to
/// everyone else.
public struct ControlConnectionShares: Sendable {
  /// Whose share a connection counts against.
  public enum Holder: Hashable, Sendable {
    /// A process in no refusing run: the server's overall limit only.
    case unconfined
    /// A process in the refusing run of this keeper.
    case run(Int32)
    /// A process whose ancestry could not be read while runs are recorded.
    case unverifiable

    /// The holder of a connection from a process about which `decision` was made.
    public init(_ decision: DeviceControlRuns.Decision) {
      switch decision {
      case .allowed: self = .unconfined
      case .refused(let run): self = .run(run)
      case .unverifiable: self = .unverifiable
      }
    }
  }

  /// Connections from inside refusing runs (and unverifiable ones) at once, altogether.
  public static let confinedLimit = 8
  /// Connections from inside one refusing run (or unverifiable ones) at once.
  public static let perRunLimit = 4

  private var held: [Holder: Int] = [:]
  private var confined = 0

  /// No connections.
  public init() {}

  /// Connections held now by `holder`.
  public func count(_ holder: Holder) -> Int { held[holder, default: 0] }

  /// Takes a connection for `holder`, unless its share is used up.
  /// - Returns: whether it was taken (then ``release(_:)`` gives it back).
  public mutating func admit(_ holder: Holder) -> Bool {
    if holder != .unconfined {
      guard confined < Self.confinedLimit, held[holder, default: 0] < Self.perRunLimit else { return false }
      confined += 1
    }
    held[holder, default: 0] += 1
    return true
  }

  /// Gives back a connection ``admit(_:)`` took for `holder`.
  public mutating func release(_ holder: Holder) {
    guard let count = held[holder], count > 0 else { return }
    held[holder] = count == 1 ? nil : count - 1
    if holder != .unconfined { confined -= 1 }
  }
}
