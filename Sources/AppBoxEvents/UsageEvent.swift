import SandboxPolicy

/// A sample of the sandbox's usage (`"type":"usage"`), so that a report can draw used
/// bytes against capacity over time.
///
/// The rule that keeps the log small (``UsageSample/shouldRecord(_:after:)``): one sample
/// at mount, one after each purge (after its events) and each capacity change (after its
/// purge), one at unmount, and in between at most one per interval (`--usage-interval`,
/// default 1 s), only when the usage, the capacity or the ENOSPC count changed since the
/// last sample.
public struct UsageEvent: Sendable, Hashable, Codable {
  /// Why the sample was taken.
  public enum Reason: String, Sendable, Hashable, CaseIterable {
    /// The mount came up.
    case mount
    /// The interval passed and something changed.
    case interval
    /// Files were purged (one sample after each purge's events).
    case purge
    /// The capacity changed (`appbox resize`, `appbox pressure`).
    case capacity
    /// The mount is going away.
    case unmount
  }

  /// Wall-clock time, in seconds since the Unix epoch.
  public var time: Double
  /// What was sampled.
  public var sample: UsageSample
  /// The device's lock state at the time.
  public var state: DeviceState
  /// Why it was taken.
  public var reason: Reason

  /// Creates an event.
  /// - Parameters:
  ///   - time: Seconds since the Unix epoch.
  ///   - sample: The usage and counters.
  ///   - state: The device's lock state.
  ///   - reason: Why it was taken.
  public init(time: Double, sample: UsageSample, state: DeviceState, reason: Reason) {
    self.time = time
    self.sample = sample
    self.state = state
    self.reason = reason
  }

  enum CodingKeys: String, CodingKey {
    case type, time, used, capacity, caches, tmp, purges, bytesPurged, noSpace, state, reason
  }

  /// Writes e.g. `{"type":"usage","time":1700000000.5,"used":1048576,"capacity":33554432,`
  /// `"caches":524288,"tmp":0,"purges":3,"bytesPurged":12288,"noSpace":0,"state":"UNLOCKED",`
  /// `"reason":"interval"}`. `purges`, `bytesPurged` and `noSpace` (ENOSPC refusals) count
  /// since the mount.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("usage", forKey: .type)
    try container.encodeSeconds(time, forKey: .time)
    try container.encode(sample.used, forKey: .used)
    try container.encode(sample.capacity, forKey: .capacity)
    try container.encode(sample.caches, forKey: .caches)
    try container.encode(sample.tmp, forKey: .tmp)
    try container.encode(sample.purges, forKey: .purges)
    try container.encode(sample.bytesPurged, forKey: .bytesPurged)
    try container.encode(sample.noSpace, forKey: .noSpace)
    try container.encode(state.name, forKey: .state)
    try container.encode(reason.rawValue, forKey: .reason)
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    time = try container.decodeSeconds(forKey: .time)
    sample = UsageSample(
      used: try container.decode(Int64.self, forKey: .used),
      capacity: try container.decode(Int64.self, forKey: .capacity),
      caches: try container.decode(Int64.self, forKey: .caches),
      tmp: try container.decode(Int64.self, forKey: .tmp),
      purges: try container.decode(Int.self, forKey: .purges),
      bytesPurged: try container.decode(Int64.self, forKey: .bytesPurged),
      noSpace: try container.decode(Int.self, forKey: .noSpace))
    state = try container.decodeName(.state, "state", DeviceState.init(name:))
    reason = try container.decodeName(.reason, "reason", Reason.init(rawValue:))
  }
}

/// The numbers a ``UsageEvent`` carries.
public struct UsageSample: Sendable, Hashable {
  /// Bytes in use (as `du` counts).
  public var used: Int64
  /// The capacity in bytes.
  public var capacity: Int64
  /// Bytes in `Library/Caches`.
  public var caches: Int64
  /// Bytes in `tmp`.
  public var tmp: Int64
  /// Files purged since the mount.
  public var purges: Int
  /// Bytes purged since the mount.
  public var bytesPurged: Int64
  /// ENOSPC refusals since the mount.
  public var noSpace: Int

  /// Creates a sample.
  public init(
    used: Int64, capacity: Int64, caches: Int64, tmp: Int64, purges: Int, bytesPurged: Int64, noSpace: Int
  ) {
    self.used = used
    self.capacity = capacity
    self.caches = caches
    self.tmp = tmp
    self.purges = purges
    self.bytesPurged = bytesPurged
    self.noSpace = noSpace
  }

  /// Whether a sample taken for `reason` is logged, given the last one logged: always at
  /// mount, purge, capacity change and unmount; on an interval only when the usage, the
  /// capacity or the ENOSPC count changed.
  /// - Parameters:
  ///   - reason: Why the sample is taken.
  ///   - last: The last sample logged, if any.
  public func shouldRecord(_ reason: UsageEvent.Reason, after last: UsageSample?) -> Bool {
    guard reason == .interval, let last else { return true }
    return used != last.used || capacity != last.capacity || noSpace != last.noSpace
  }
}
