// MARK: - Classes as the backing store holds them

extension ProtectionClass {
  /// The class an item counts as when its stored class names no class or cannot be read:
  /// the strictest one, `complete` (docs/reference.md, Data Protection). Its content is
  /// readable while the device is unlocked, so that the owner can set a class again, and
  /// refused while it is locked; nothing falls back to a weaker default.
  public static let strictest: ProtectionClass = .complete
}

/// What one of an item's class attributes held on the backing store.
public enum StoredProtection: Sendable, Hashable {
  /// The attribute is not there (`ENODATA`): the next record, or the mount's default,
  /// decides.
  case absent
  /// A class, in one of the accepted spellings.
  case valid(ProtectionClass)
  /// A value that names no class (the bytes as stored): counts as
  /// ``ProtectionClass/strictest``.
  case unparsable([UInt8])
  /// The attribute could not be read (the `errno`, not `ENODATA`): counts as
  /// ``ProtectionClass/strictest``.
  case unreadable(errno: Int32)

  /// The record of a value read from the store.
  public init(value: [UInt8]) {
    self = ProtectionClass(parsing: value).map { .valid($0) } ?? .unparsable(value)
  }

  /// The class this record gives, or nil when it is ``absent``.
  public var protectionClass: ProtectionClass? {
    switch self {
    case .absent: nil
    case .valid(let protectionClass): protectionClass
    case .unparsable, .unreadable: .strictest
    }
  }

  /// Whether the record holds something AppBox cannot use: it counts as the strictest
  /// class, and is reported.
  public var isUnusable: Bool {
    switch self {
    case .absent, .valid: false
    case .unparsable, .unreadable: true
    }
  }
}
