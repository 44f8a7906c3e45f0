/// One purged file, logged as one JSON Lines event (SPEC §4: every purge is an event).
public struct PurgeEvent: Sendable, Hashable {
  /// Why a file was purged.
  public enum Reason: String, Sendable, Hashable, CaseIterable {
    /// A write or create needed space that was not free.
    case pressure
    /// Purging was asked for explicitly (free N bytes, or a whole domain).
    case explicit
    /// The file had not been used for longer than an age limit.
    case age
    /// Background purging above the high-water mark.
    case watermark
    /// The capacity was lowered below the usage (`appbox resize`, `appbox pressure`).
    case shrink
  }

  /// Wall-clock time of the purge, in seconds since the Unix epoch.
  public var time: Double
  /// The file's path components from the mount root, as raw bytes.
  public var path: [[UInt8]]
  /// The bytes freed (as the quota counts them: allocated bytes).
  public var bytes: Int64
  /// The file's domain, `caches` or `tmp`.
  public var domain: StorageDomain
  /// Why it was purged.
  public var reason: Reason
  /// When the file was last used, in seconds since the Unix epoch.
  public var lastUse: Double

  /// Creates an event.
  /// - Parameters:
  ///   - time: Seconds since the Unix epoch.
  ///   - path: The path components from the mount root, e.g. `["tmp", "a.dat"]`.
  ///   - bytes: The bytes freed.
  ///   - domain: The file's domain.
  ///   - reason: Why it was purged.
  ///   - lastUse: When it was last used, in seconds since the Unix epoch.
  public init(
    time: Double, path: [[UInt8]], bytes: Int64, domain: StorageDomain, reason: Reason,
    lastUse: Double
  ) {
    self.time = time
    self.path = path
    self.bytes = bytes
    self.domain = domain
    self.reason = reason
    self.lastUse = lastUse
  }

  /// The path's components joined with `/`, as raw bytes.
  public var pathBytes: [UInt8] {
    Array(path.joined(separator: [UInt8(ascii: "/")]))
  }

  /// The event as one JSON object without a trailing newline, e.g.
  /// `{"type":"purge","time":1700000000.5,"path":"tmp/a.dat","bytes":4096,`
  /// `"domain":"tmp","reason":"pressure","lastUse":1699999000.0}`.
  ///
  /// `path` is the display form (``JSONText/quoted(bytes:)``: each ill-formed UTF-8
  /// subsequence becomes U+FFFD). When the path is not valid UTF-8, a `"pathHex"` member
  /// follows `path` with the exact bytes in lowercase hex, so the log stays lossless (the
  /// same convention as refusal events). Times are ``JSONText/number(_:)``.
  public var jsonLine: String {
    let bytesOfPath = pathBytes
    var line = "{\"type\":\"purge\",\"time\":" + JSONText.number(time)
    line += ",\"path\":" + JSONText.quoted(bytes: bytesOfPath)
    if !JSONText.isValidUTF8(bytesOfPath) {
      line += ",\"pathHex\":\"" + JSONText.hex(bytesOfPath) + "\""
    }
    line += ",\"bytes\":\(bytes)"
    line += ",\"domain\":" + JSONText.quoted(domain.machineName)
    line += ",\"reason\":" + JSONText.quoted(reason.rawValue)
    line += ",\"lastUse\":" + JSONText.number(lastUse) + "}"
    return line
  }
}
