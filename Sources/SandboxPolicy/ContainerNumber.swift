/// A container's number on one mount: ``top`` (0) for a plain mount's one container and
/// for a device's own directories (its root, `Containers/`…), 1, 2, … for a device's
/// containers in the order the mount met them. A number is never given out twice while
/// a mount lasts, so what is charged to a removed container never lands on another.
public struct ContainerNumber: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
  /// The number.
  public var rawValue: UInt32

  /// A number; see the type.
  public init(rawValue: UInt32) { self.rawValue = rawValue }

  /// A plain mount's container; on a device, the device's own directories.
  public static let top = ContainerNumber(rawValue: 0)

  public static func < (lhs: ContainerNumber, rhs: ContainerNumber) -> Bool { lhs.rawValue < rhs.rawValue }

  public var description: String { String(rawValue) }
}

/// A domain of one container: what the quota books charge an allocation to.
public struct StorageArea: Hashable, Sendable, CustomStringConvertible {
  /// The container.
  public var container: ContainerNumber
  /// The domain within it.
  public var domain: StorageDomain

  /// An area; see the properties.
  public init(_ container: ContainerNumber, _ domain: StorageDomain) {
    self.container = container
    self.domain = domain
  }

  /// A domain of a plain mount's container (or of a device's own directories).
  public init(_ domain: StorageDomain) { self.init(.top, domain) }

  public var description: String { "\(domain)@\(container)" }
}
