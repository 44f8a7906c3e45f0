/// An iOS Data Protection class (docs/reference.md#data-protection), deciding when a file's content is accessible.
///
/// Cases carry Apple's names; ``letter`` and ``appleNumber`` give the other spellings
/// Apple uses. Parse any accepted spelling with `init(parsing:)`.
public enum ProtectionClass: Sendable, Hashable, CaseIterable, CustomStringConvertible {
  /// Class A (`NSFileProtectionComplete`): content accessible only while unlocked or in
  /// the grace period.
  case complete
  /// Class B (`NSFileProtectionCompleteUnlessOpen`): new files can always be created and
  /// handles stay usable; existing files cannot be opened while locked.
  case completeUnlessOpen
  /// Class C (`NSFileProtectionCompleteUntilFirstUserAuthentication`): accessible once the
  /// device has been unlocked after boot (mount). The container default.
  case completeUntilFirstUserAuthentication
  /// Class CX (`NSFileProtectionCompleteWhenUserInactive`): like C, but inaccessible like A
  /// once the device has stayed locked longer than the inactivity timeout.
  case completeWhenUserInactive
  /// Class D (`NSFileProtectionNone`): always accessible.
  ///
  /// Where a `ProtectionClass?` is expected, `.none` means `nil`: write
  /// `ProtectionClass.none` there.
  case none

  /// The class a new item gets when neither it nor its parent directory names one.
  public static let containerDefault: ProtectionClass = .completeUntilFirstUserAuthentication

  /// Apple's canonical name, e.g. `completeUnlessOpen`; the value of the protection xattr.
  public var name: String {
    switch self {
    case .complete: "complete"
    case .completeUnlessOpen: "completeUnlessOpen"
    case .completeUntilFirstUserAuthentication: "completeUntilFirstUserAuthentication"
    case .completeWhenUserInactive: "completeWhenUserInactive"
    case .none: "none"
    }
  }

  /// The class letter: `A`, `B`, `C`, `CX` or `D`.
  public var letter: String {
    switch self {
    case .complete: "A"
    case .completeUnlessOpen: "B"
    case .completeUntilFirstUserAuthentication: "C"
    case .completeWhenUserInactive: "CX"
    case .none: "D"
    }
  }

  /// Apple's numeric class identifier: 1 (A), 2 (B), 3 (C), 4 (D), 7 (CX).
  public var appleNumber: Int {
    switch self {
    case .complete: 1
    case .completeUnlessOpen: 2
    case .completeUntilFirstUserAuthentication: 3
    case .completeWhenUserInactive: 7
    case .none: 4
    }
  }

  /// The Foundation constant's name, e.g. `NSFileProtectionComplete`.
  public var foundationName: String {
    switch self {
    case .complete: "NSFileProtectionComplete"
    case .completeUnlessOpen: "NSFileProtectionCompleteUnlessOpen"
    case .completeUntilFirstUserAuthentication:
      "NSFileProtectionCompleteUntilFirstUserAuthentication"
    case .completeWhenUserInactive: "NSFileProtectionCompleteWhenUserInactive"
    case .none: "NSFileProtectionNone"
    }
  }

  /// The canonical name (``name``).
  public var description: String { name }
}
