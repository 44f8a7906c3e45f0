/// The extended attributes AppBox itself defines, all in its reserved `user.appbox.`
/// namespace (see ``XattrNameMapping``).
public enum AppBoxAttribute: CaseIterable, Sendable {
  /// Per item, read-write: the Data Protection class (value: a class name).
  case protection
  /// Per file, read-write: purge urgency under storage pressure (`low`, `medium`, `high`).
  case purgeUrgency
  /// Mount root, read-only: the simulated device's state (`BFU`, `UNLOCKED`, `GRACE`, `LOCKED`).
  case deviceState
  /// Mount root, read-only: the capacity in bytes.
  case capacity
  /// Mount root, read-only: free bytes plus everything purgeable ("important" capacity).
  case availableImportant
  /// Mount root, read-only: free bytes plus purgeable tmp ("opportunistic" capacity).
  case availableOpportunistic

  /// The attribute's name on the mount and on the backing store.
  public var name: String {
    switch self {
    case .protection: "user.appbox.protection"
    case .purgeUrgency: "user.appbox.purge-urgency"
    case .deviceState: "user.appbox.device-state"
    case .capacity: "user.appbox.capacity"
    case .availableImportant: "user.appbox.available-important"
    case .availableOpportunistic: "user.appbox.available-opportunistic"
    }
  }

  /// Whether programs may set it (the others are computed on the mount's root).
  public var isWritable: Bool { self == .protection || self == .purgeUrgency }

  /// The attribute a name denotes, if AppBox defines it.
  public init?(name: some Collection<UInt8>) {
    guard let match = Self.allCases.first(where: { name.elementsEqual($0.name.utf8) }) else { return nil }
    self = match
  }

  /// Where AppBox keeps the class it gave a new item (its directory's, or the mount's
  /// default): internal, hidden from `listxattr`, overridden by an explicit
  /// ``protection``.
  public static let inheritedProtectionName = "user.appbox.inherited-protection"

  /// The read-only attributes shown on the mount's root.
  public static let rootAttributes: [AppBoxAttribute] = [
    .deviceState, .capacity, .availableImportant, .availableOpportunistic,
  ]
}
