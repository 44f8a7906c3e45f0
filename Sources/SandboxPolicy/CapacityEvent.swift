/// A change of the sandbox's capacity while mounted, logged as one JSON Lines event.
public struct CapacityEvent: Sendable, Hashable {
  /// Who changed the capacity.
  public enum Reason: String, Sendable, Hashable, CaseIterable {
    /// `appbox resize`.
    case resize
    /// A step of `appbox pressure`'s schedule.
    case schedule
  }

  /// Wall-clock time of the change, in seconds since the Unix epoch.
  public var time: Double
  /// The capacity before, in bytes.
  public var from: Int64
  /// The capacity after, in bytes.
  public var to: Int64
  /// Who changed it.
  public var reason: Reason

  /// Creates an event.
  /// - Parameters:
  ///   - time: Seconds since the Unix epoch.
  ///   - from: The capacity before, in bytes.
  ///   - to: The capacity after, in bytes.
  ///   - reason: Who changed it.
  public init(time: Double, from: Int64, to: Int64, reason: Reason) {
    self.time = time
    self.from = from
    self.to = to
    self.reason = reason
  }

  /// The event as one JSON object without a trailing newline, e.g.
  /// `{"type":"capacity","time":1700000000.5,"from":67108864,"to":33554432,"reason":"resize"}`.
  public var jsonLine: String {
    "{\"type\":\"capacity\",\"time\":" + JSONText.number(time) + ",\"from\":\(from),\"to\":\(to),\"reason\":"
      + JSONText.quoted(reason.rawValue) + "}"
  }
}
