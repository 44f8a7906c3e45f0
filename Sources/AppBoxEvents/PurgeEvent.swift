import SandboxPolicy

/// One purged file (`"type":"purge"`; every purge is an event, docs/reference.md).
public struct PurgeEvent: Sendable, Hashable, Codable {
  /// Why a file was purged.
  public typealias Reason = PurgeReason

  /// Wall-clock time of the purge, in seconds since the Unix epoch.
  public var time: Double
  /// The file's path from the mount root, as raw bytes.
  public var pathBytes: [UInt8]
  /// The bytes freed (as the quota counts them: allocated bytes).
  public var bytes: Int64
  /// The file's domain, `caches` or `tmp`.
  public var domain: StorageDomain
  /// Why it was purged.
  public var reason: Reason
  /// When the file was last used, in seconds since the Unix epoch.
  public var lastUse: Double
  /// On a device: the container the file was in (a bundle or group id).
  public var container: String? = nil
  /// On a device, for a purge under pressure: the container whose allocation needed the
  /// room (whose write this cache paid for).
  public var requester: String? = nil

  /// Creates an event.
  /// - Parameters:
  ///   - time: Seconds since the Unix epoch.
  ///   - pathBytes: The path from the mount root, e.g. `tmp/a.dat`, as bytes.
  ///   - bytes: The bytes freed.
  ///   - domain: The file's domain.
  ///   - reason: Why it was purged.
  ///   - lastUse: When it was last used, in seconds since the Unix epoch.
  public init(
    time: Double, pathBytes: [UInt8], bytes: Int64, domain: StorageDomain, reason: Reason, lastUse: Double
  ) {
    self.time = time
    self.pathBytes = pathBytes
    self.bytes = bytes
    self.domain = domain
    self.reason = reason
    self.lastUse = lastUse
  }

  /// Creates an event from path components, e.g. `["tmp", "a.dat"]`, joined with `/`.
  public init(
    time: Double, path: [[UInt8]], bytes: Int64, domain: StorageDomain, reason: Reason, lastUse: Double
  ) {
    self.init(
      time: time, pathBytes: Array(path.joined(separator: [UInt8(ascii: "/")])), bytes: bytes, domain: domain,
      reason: reason, lastUse: lastUse)
  }

  /// The path for display: ill-formed UTF-8 replaced by U+FFFD.
  public var path: String { String(decoding: pathBytes, as: UTF8.self) }

  enum CodingKeys: String, CodingKey {
    case type, time, path, pathHex, bytes, domain, reason, lastUse, container, requester
  }

  /// Writes e.g. `{"type":"purge","time":1700000000.5,"path":"tmp/a.dat","bytes":4096,`
  /// `"domain":"tmp","reason":"pressure","lastUse":1699999000.0}`; on a device also
  /// `"container"` and, under pressure, `"requester"`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("purge", forKey: .type)
    try container.encodeSeconds(time, forKey: .time)
    try container.encodePath(pathBytes, forKey: .path, hexKey: .pathHex)
    try container.encode(bytes, forKey: .bytes)
    try container.encode(domain.machineName, forKey: .domain)
    try container.encode(reason.rawValue, forKey: .reason)
    try container.encodeSeconds(lastUse, forKey: .lastUse)
    if let owner = self.container { try container.encode(owner, forKey: .container) }
    if let requester { try container.encode(requester, forKey: .requester) }
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    time = try container.decodeSeconds(forKey: .time)
    pathBytes = try container.decodePath(forKey: .path, hexKey: .pathHex)
    bytes = try container.decode(Int64.self, forKey: .bytes)
    domain = try container.decodeName(.domain, "domain", StorageDomain.init(machineName:))
    reason = try container.decodeName(.reason, "reason", Reason.init(rawValue:))
    lastUse = try container.decodeSeconds(forKey: .lastUse)
    self.container = try container.decodeIfPresent(String.self, forKey: .container)
    requester = try container.decodeIfPresent(String.self, forKey: .requester)
  }
}
