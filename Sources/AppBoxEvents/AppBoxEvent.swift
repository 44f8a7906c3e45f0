/// Any line of an event log, by its `type` (docs/reference.md, "Events"): the one schema
/// the daemon writes and every reader decodes.
public enum AppBoxEvent: Sendable, Hashable, Codable {
  /// A segment's first line (`log`).
  case log(LogHeader)
  /// A segment's last line when rotation closed it (`rotate`).
  case rotate(LogRotation)
  /// A usage sample (`usage`).
  case usage(UsageEvent)
  /// A device's container's usage, after a usage sample (`containerUsage`).
  case containerUsage(ContainerUsageEvent)
  /// A change of capacity (`capacity`).
  case capacity(CapacityEvent)
  /// A purged file (`purge`).
  case purge(PurgeEvent)
  /// A purged name created again or looked up and missed (`recreated`, `missed`).
  case purgeCost(PurgeCostEvent)
  /// A Data Protection refusal, possibly coalesced (`refusal`).
  case refusal(ProtectionEvent)
  /// A change of the lock state (`state`).
  case state(DeviceStateEvent)
  /// A stored class that cannot be used, counted as `complete` (`unreadableClass`).
  case unreadableClass(UnreadableClassEvent)
  /// A request a device's app confinement refused (`confinement`).
  case confinement(ConfinementEvent)

  /// Every `type` this version reads, in the order above.
  public static let typeNames = [
    "log", "rotate", "usage", "containerUsage", "capacity", "purge", "recreated", "missed", "refusal", "state",
    "unreadableClass", "confinement",
  ]

  /// The line's `type`.
  public var typeName: String {
    switch self {
    case .log: "log"
    case .rotate: "rotate"
    case .usage: "usage"
    case .containerUsage: "containerUsage"
    case .capacity: "capacity"
    case .purge: "purge"
    case .purgeCost(let cost): cost.kind.rawValue
    case .refusal: "refusal"
    case .state: "state"
    case .unreadableClass: "unreadableClass"
    case .confinement: "confinement"
    }
  }

  /// When it happened, in seconds since the Unix epoch.
  public var time: Double {
    switch self {
    case .log(let header): header.time
    case .rotate(let rotation): rotation.time
    case .usage(let usage): usage.time
    case .containerUsage(let usage): usage.time
    case .capacity(let capacity): capacity.time
    case .purge(let purge): purge.time
    case .purgeCost(let cost): cost.time
    case .refusal(let refusal): refusal.time
    case .state(let state): state.time
    case .unreadableClass(let event): event.time
    case .confinement(let event): event.time
    }
  }

  /// Whether the line is the log's own structure (a header or a rotation mark), not an
  /// event of the mount.
  public var isLogStructure: Bool {
    switch self {
    case .log, .rotate: true
    default: false
    }
  }

  private var payload: any Encodable {
    switch self {
    case .log(let header): header
    case .rotate(let rotation): rotation
    case .usage(let usage): usage
    case .containerUsage(let usage): usage
    case .capacity(let capacity): capacity
    case .purge(let purge): purge
    case .purgeCost(let cost): cost
    case .refusal(let refusal): refusal
    case .state(let state): state
    case .unreadableClass(let event): event
    case .confinement(let event): event
    }
  }

  public func encode(to encoder: any Encoder) throws { try payload.encode(to: encoder) }

  private enum TypeKey: String, CodingKey { case type }

  /// Reads the event its `type` names.
  /// - Throws: ``EventLineError/unknownType(_:)`` for a type this version does not know.
  public init(from decoder: any Decoder) throws {
    let type = try decoder.container(keyedBy: TypeKey.self).decode(String.self, forKey: .type)
    switch type {
    case "log": self = .log(try LogHeader(from: decoder))
    case "rotate": self = .rotate(try LogRotation(from: decoder))
    case "usage": self = .usage(try UsageEvent(from: decoder))
    case "containerUsage": self = .containerUsage(try ContainerUsageEvent(from: decoder))
    case "capacity": self = .capacity(try CapacityEvent(from: decoder))
    case "purge": self = .purge(try PurgeEvent(from: decoder))
    case "recreated", "missed": self = .purgeCost(try PurgeCostEvent(from: decoder))
    case "refusal": self = .refusal(try ProtectionEvent(from: decoder))
    case "state": self = .state(try DeviceStateEvent(from: decoder))
    case "unreadableClass": self = .unreadableClass(try UnreadableClassEvent(from: decoder))
    case "confinement": self = .confinement(try ConfinementEvent(from: decoder))
    default: throw EventLineError.unknownType(type)
    }
  }

  /// The event as one JSON object, without a newline.
  /// - Throws: only for a value no line can hold (none of this module's events has one:
  ///   seconds are clamped, every other member is an integer or a string).
  public func encoded() throws(EventEncodingError) -> [UInt8] { try JSONLineEncoder.encode(self) }

  /// The event of one line (without its newline).
  /// - Throws: ``EventLineError``: not JSON, an unknown type, or a known type with a bad
  ///   member.
  public static func decode(_ line: some Collection<UInt8>) throws(EventLineError) -> AppBoxEvent {
    try JSONLineDecoder.decode(AppBoxEvent.self, from: line)
  }

  /// The `type` of a line as the daemon writes it (`{"type":"…"` first), without
  /// decoding it: a cheap filter for followers that want one type. Nil when the line does
  /// not start that way (then decode it to know).
  public static func leadingType(_ line: some Collection<UInt8>) -> Substring? {
    let prefix = #"{"type":""#.utf8
    guard line.starts(with: prefix) else { return nil }
    let rest = line.dropFirst(prefix.count)
    guard let end = rest.firstIndex(of: UInt8(ascii: "\"")) else { return nil }
    let name = rest[..<end]
    guard !name.contains(UInt8(ascii: "\\")) else { return nil }
    return Substring(String(decoding: name, as: UTF8.self))
  }
}
