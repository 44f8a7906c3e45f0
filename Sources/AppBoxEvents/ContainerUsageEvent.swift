import SandboxPolicy

/// One container's usage on a device (`"type":"containerUsage"`), logged right after a
/// usage sample for each container whose usage changed since the last such line (every
/// container at mount, after a capacity change and at unmount): what a report draws per
/// app and group. A plain mount logs none.
public struct ContainerUsageEvent: Sendable, Hashable, Codable {
  /// Wall-clock time (the usage sample's), in seconds since the Unix epoch.
  public var time: Double
  /// The container's bundle or group id.
  public var container: String
  /// App or group.
  public var kind: ContainerKind
  /// Its bytes in use (as `du` counts), all domains.
  public var used: Int64
  /// Its bytes in `Library/Caches`.
  public var caches: Int64
  /// Its bytes in `tmp`.
  public var tmp: Int64
  /// Why the usage sample was taken.
  public var reason: UsageEvent.Reason

  /// Creates an event; see the properties.
  public init(
    time: Double, container: String, kind: ContainerKind, used: Int64, caches: Int64, tmp: Int64,
    reason: UsageEvent.Reason
  ) {
    self.time = time
    self.container = container
    self.kind = kind
    self.used = used
    self.caches = caches
    self.tmp = tmp
    self.reason = reason
  }

  enum CodingKeys: String, CodingKey { case type, time, container, kind, used, caches, tmp, reason }

  /// Writes e.g. `{"type":"containerUsage","time":1700000000.5,"container":"com.example.a",`
  /// `"kind":"app","used":1048576,"caches":524288,"tmp":0,"reason":"interval"}`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("containerUsage", forKey: .type)
    try container.encodeSeconds(time, forKey: .time)
    try container.encode(self.container, forKey: .container)
    try container.encode(kind.description, forKey: .kind)
    try container.encode(used, forKey: .used)
    try container.encode(caches, forKey: .caches)
    try container.encode(tmp, forKey: .tmp)
    try container.encode(reason.rawValue, forKey: .reason)
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    time = try container.decodeSeconds(forKey: .time)
    self.container = try container.decode(String.self, forKey: .container)
    kind = try container.decodeName(.kind, "kind") { name in ContainerKind.allCases.first { $0.description == name } }
    used = try container.decode(Int64.self, forKey: .used)
    caches = try container.decode(Int64.self, forKey: .caches)
    tmp = try container.decode(Int64.self, forKey: .tmp)
    reason = try container.decodeName(.reason, "reason", UsageEvent.Reason.init(rawValue:))
  }
}
