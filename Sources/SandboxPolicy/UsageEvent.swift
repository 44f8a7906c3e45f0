/// A sample of the sandbox's usage, logged as one JSON Lines event so that a report can
/// draw used bytes against capacity over time.
///
/// The rule that keeps the log small (``UsageSample/shouldRecord(_:after:)``): one sample
/// at mount, one after each capacity change (after its purge), one at unmount, and in
/// between at most one per interval (`--usage-interval`, default 1 s), only when the
/// usage, the capacity or the ENOSPC count changed since the last sample.
public struct UsageEvent: Sendable, Hashable {
  /// Why the sample was taken.
  public enum Reason: String, Sendable, Hashable, CaseIterable {
    /// The mount came up.
    case mount
    /// The interval passed and something changed.
    case interval
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

  /// The event as one JSON object without a trailing newline, e.g.
  /// `{"type":"usage","time":1700000000.5,"used":1048576,"capacity":33554432,"caches":524288,`
  /// `"tmp":0,"purges":3,"bytesPurged":12288,"noSpace":0,"state":"UNLOCKED","reason":"interval"}`.
  /// `purges`, `bytesPurged` and `noSpace` (ENOSPC refusals) count since the mount.
  public var jsonLine: String {
    "{\"type\":\"usage\",\"time\":" + JSONText.number(time) + ",\"used\":\(sample.used),\"capacity\":\(sample.capacity)"
      + ",\"caches\":\(sample.caches),\"tmp\":\(sample.tmp),\"purges\":\(sample.purges)"
      + ",\"bytesPurged\":\(sample.bytesPurged),\"noSpace\":\(sample.noSpace),\"state\":"
      + JSONText.quoted(state.name) + ",\"reason\":" + JSONText.quoted(reason.rawValue) + "}"
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
  /// mount, capacity change and unmount; on an interval only when the usage, the
  /// capacity or the ENOSPC count changed.
  /// - Parameters:
  ///   - reason: Why the sample is taken.
  ///   - last: The last sample logged, if any.
  public func shouldRecord(_ reason: UsageEvent.Reason, after last: UsageSample?) -> Bool {
    guard reason == .interval, let last else { return true }
    return used != last.used || capacity != last.capacity || noSpace != last.noSpace
  }
}
