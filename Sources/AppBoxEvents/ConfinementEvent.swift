/// A request a device's app confinement refused (`"type":"confinement"`,
/// docs/reference.md#app-confinement): a program of an app's run reaching for a container
/// that is neither its app's nor one of its groups', or a request under `Containers/`
/// whose process the daemon cannot identify. Logged once per mount for each app,
/// container and reason; every refusal is counted in `appbox status`.
public struct ConfinementEvent: Sendable, Hashable, Codable {
  /// Why the request was refused.
  public enum Reason: String, Sendable, Hashable, CaseIterable {
    /// A confined program asked for another app's container or a group it is not in.
    case otherContainer
    /// The request came with process id 0 (from another pid namespace).
    case noProcess
    /// The process's control group could not be read (`/proc/TID/cgroup`).
    case unverifiable
  }

  /// Wall-clock time, in seconds since the Unix epoch.
  public var time: Double
  /// The refused item's path relative to the mount, as raw bytes.
  public var pathBytes: [UInt8]
  /// Why.
  public var reason: Reason
  /// The app the requesting program runs as (nil when it could not be told).
  public var app: String?
  /// The container (bundle or group id) of the refused item, when it is one the device knows.
  public var container: String?
  /// The request (`lookup`, `open`, `getattr`…).
  public var operation: String

  /// An event; see the properties.
  public init(
    time: Double, pathBytes: some Collection<UInt8>, reason: Reason, app: String?, container: String?,
    operation: String
  ) {
    self.time = time
    self.pathBytes = Array(pathBytes)
    self.reason = reason
    self.app = app
    self.container = container
    self.operation = operation
  }

  /// The path for display: ill-formed UTF-8 replaced by U+FFFD.
  public var path: String { String(decoding: pathBytes, as: UTF8.self) }

  enum CodingKeys: String, CodingKey {
    case type, time, path, pathHex, reason, app, container, operation
  }

  /// Writes e.g. `{"type":"confinement","time":1700000000.5,`
  /// `"path":"Containers/Data/Application/com.example.other","reason":"otherContainer",`
  /// `"app":"com.example.widget","container":"com.example.other","operation":"lookup"}`
  /// (`pathHex` after `path` when the path is not UTF-8; `app` and `container` only when
  /// known).
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("confinement", forKey: .type)
    try container.encodeSeconds(time, forKey: .time)
    try container.encodePath(pathBytes, forKey: .path, hexKey: .pathHex)
    try container.encode(reason.rawValue, forKey: .reason)
    try container.encodeIfPresent(app, forKey: .app)
    try container.encodeIfPresent(self.container, forKey: .container)
    try container.encode(operation, forKey: .operation)
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    time = try container.decodeSeconds(forKey: .time)
    pathBytes = try container.decodePath(forKey: .path, hexKey: .pathHex)
    reason = try container.decodeName(.reason, "reason", Reason.init(rawValue:))
    app = try container.decodeIfPresent(String.self, forKey: .app)
    self.container = try container.decodeIfPresent(String.self, forKey: .container)
    operation = try container.decode(String.self, forKey: .operation)
  }
}
