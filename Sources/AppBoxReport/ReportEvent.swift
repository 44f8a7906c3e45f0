import Foundation

/// One line of an AppBox event log (`appbox events`), as a report reads it.
public enum ReportEvent: Sendable, Hashable {
  /// A usage sample (`"type":"usage"`).
  case usage(Usage)
  /// A change of capacity (`"type":"capacity"`).
  case capacity(time: Double, from: Int64, to: Int64, reason: String)
  /// A purged file (`"type":"purge"`).
  case purge(Purge)
  /// A purged name created again (`recreated`) or looked up and missed (`missed`).
  case cost(Cost)
  /// A Data Protection refusal (`"type":"refusal"`).
  case refusal(time: Double, path: String, protectionClass: String, operation: String, state: String)
  /// A change of the device's lock state (`"type":"state"`).
  case state(time: Double, from: String, to: String)

  /// A usage sample.
  public struct Usage: Sendable, Hashable {
    /// Seconds since the Unix epoch.
    public var time: Double
    /// Bytes in use.
    public var used: Int64
    /// The capacity in bytes.
    public var capacity: Int64
    /// ENOSPC refusals since the mount.
    public var noSpace: Int
    /// The lock state, if the sample names it.
    public var state: String?
    /// Why the sample was taken (`mount`, `interval`, `capacity`, `unmount`).
    public var reason: String
  }

  /// A purged file.
  public struct Purge: Sendable, Hashable {
    /// Seconds since the Unix epoch.
    public var time: Double
    /// The path from the mount root (display form).
    public var path: String
    /// The bytes freed.
    public var bytes: Int64
    /// `caches` or `tmp`.
    public var domain: String
    /// `pressure`, `explicit`, `age`, `watermark` or `shrink`.
    public var reason: String
  }

  /// The app paying for a purge.
  public struct Cost: Sendable, Hashable {
    /// Whether the name was created again (else: looked up and missed).
    public var recreated: Bool
    /// Seconds since the Unix epoch.
    public var time: Double
    /// The path from the mount root (display form).
    public var path: String
    /// The bytes the file had when purged.
    public var purgedBytes: Int64
    /// Seconds from the purge to this event.
    public var secondsSincePurge: Double
  }

  /// When it happened, in seconds since the Unix epoch.
  public var time: Double {
    switch self {
    case .usage(let usage): usage.time
    case .capacity(let time, _, _, _): time
    case .purge(let purge): purge.time
    case .cost(let cost): cost.time
    case .refusal(let time, _, _, _, _): time
    case .state(let time, _, _): time
    }
  }
}

/// Reads an event log: one JSON object a line.
public enum EventLogParser {
  /// What a log held.
  public struct Parsed: Sendable {
    /// The events understood, in time order (ties keep the log's order).
    public var events: [ReportEvent]
    /// Lines that were not JSON objects, or lacked a field their type needs.
    public var malformedLines: Int
    /// Well-formed lines of a type a report does not use.
    public var otherLines: Int
  }

  /// Parses `text`, a whole log. Blank lines are ignored; a log cut in the middle of its
  /// last line counts that line as malformed.
  public static func parse(_ text: some StringProtocol) -> Parsed {
    var parsed = Parsed(events: [], malformedLines: 0, otherLines: 0)
    for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
      let trimmed = line.trimmingCharacters(in: .whitespaces)
      if trimmed.isEmpty { continue }
      guard let data = trimmed.data(using: .utf8),
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
        let type = object["type"] as? String
      else {
        parsed.malformedLines += 1
        continue
      }
      switch event(type: type, object) {
      case .some(.some(let event)): parsed.events.append(event)
      case .some(.none): parsed.malformedLines += 1
      case .none: parsed.otherLines += 1
      }
    }
    // A stable sort: the daemon writes from several threads, so times may be out of order.
    parsed.events = parsed.events.enumerated().sorted {
      $0.element.time != $1.element.time ? $0.element.time < $1.element.time : $0.offset < $1.offset
    }.map(\.element)
    return parsed
  }

  /// The event of one object: nil for an unknown type, .some(nil) for a known type that
  /// lacks a field.
  private static func event(type: String, _ object: [String: Any]) -> ReportEvent?? {
    func number(_ key: String) -> Double? {
      guard let value = object[key] as? NSNumber else { return nil }
      let double = value.doubleValue
      return double.isFinite ? double : nil
    }
    func integer(_ key: String) -> Int64? {
      guard let double = number(key), double >= -9.0e18, double <= 9.0e18 else { return nil }
      return Int64(double)
    }
    func text(_ key: String) -> String? { object[key] as? String }
    guard let time = number("time") else {
      return ["usage", "capacity", "purge", "recreated", "missed", "refusal", "state"].contains(type) ? .some(nil) : nil
    }
    switch type {
    case "usage":
      guard let used = integer("used"), let capacity = integer("capacity") else { return .some(nil) }
      return .usage(
        .init(
          time: time, used: used, capacity: capacity, noSpace: Int(integer("noSpace") ?? 0), state: text("state"),
          reason: text("reason") ?? "interval"))
    case "capacity":
      guard let from = integer("from"), let to = integer("to") else { return .some(nil) }
      return .capacity(time: time, from: from, to: to, reason: text("reason") ?? "")
    case "purge":
      guard let bytes = integer("bytes"), let domain = text("domain"), let reason = text("reason") else {
        return .some(nil)
      }
      return .purge(.init(time: time, path: text("path") ?? "", bytes: bytes, domain: domain, reason: reason))
    case "recreated", "missed":
      guard let bytes = integer("purgedBytes") else { return .some(nil) }
      return .cost(
        .init(
          recreated: type == "recreated", time: time, path: text("path") ?? "", purgedBytes: bytes,
          secondsSincePurge: number("secondsSincePurge") ?? 0))
    case "refusal":
      return .refusal(
        time: time, path: text("path") ?? "", protectionClass: text("class") ?? "?",
        operation: text("operation") ?? "?", state: text("state") ?? "?")
    case "state":
      guard let from = text("from"), let to = text("to") else { return .some(nil) }
      return .state(time: time, from: from, to: to)
    default:
      return nil
    }
  }
}
