import Foundation
import SandboxPolicy

/// What an event log says, aggregated: the numbers of a report's summary table and of
/// `appbox experiment`'s table.
public struct ReportSummary: Sendable, Hashable {
  /// Purges of one domain for one reason.
  public struct PurgeGroup: Sendable, Hashable {
    /// `caches` or `tmp`.
    public var domain: String
    /// Why they were purged.
    public var reason: String
    /// How many files.
    public var files: Int
    /// Their bytes.
    public var bytes: Int64
  }

  /// The first and last event's times (nil for an empty log).
  public var start: Double?
  public var end: Double?
  /// Events read, and usage samples among them.
  public var events = 0
  public var usageSamples = 0
  /// The capacity at the start and at the end, and its range (from samples and changes).
  public var firstCapacity: Int64?
  public var lastCapacity: Int64?
  public var smallestCapacity: Int64?
  public var largestCapacity: Int64?
  /// Capacity changes (`resize`, `pressure`).
  public var capacityChanges = 0
  /// The largest and the last usage sampled.
  public var peakUsed: Int64?
  public var lastUsed: Int64?
  /// Purged files and their bytes, in all and by domain and reason.
  public var purges = 0
  public var bytesPurged: Int64 = 0
  public var purgeGroups: [PurgeGroup] = []
  /// Purged names created again, the bytes they had when purged, and purged names
  /// looked up and missed.
  public var recreated = 0
  public var recreatedBytes: Int64 = 0
  public var missed = 0
  /// The median time from a purge to its re-creation or missed lookup.
  public var medianSecondsToCost: Double?
  /// Data Protection refusals.
  public var refusals = 0
  /// ENOSPC refusals (the last usage sample's count; nil when the log has no samples).
  public var noSpace: Int?
  /// Lock state changes, and seconds spent in each state (from the first to the last
  /// event), in the order first seen.
  public var stateChanges = 0
  public var timeInState: [(state: String, seconds: Double)] = []

  /// Missed lookups of names the app did not create again afterwards.
  public var missedNotRecreated = 0

  /// The purge cost: how many purged names the app paid for, each once: created again,
  /// or looked up and missed and not created again (a lookup that misses and the
  /// create that follows are one re-fetch).
  public var purgeCost: Int { recreated + missedNotRecreated }

  /// Seconds from the first event to the last.
  public var duration: Double { (start != nil && end != nil) ? end! - start! : 0 }

  /// Aggregates `events` (in time order, as ``EventLogParser`` returns them).
  public init(_ events: [ReportEvent]) {
    self.events = events.count
    start = events.first?.time
    end = events.last?.time
    var groups: [String: PurgeGroup] = [:]
    var delays: [Double] = []
    var missedPaths: [String: Int] = [:]
    var state: String?
    var stateSince = start ?? 0
    var seconds: [String: Double] = [:]
    var order: [String] = []
    func enter(_ next: String, at time: Double) {
      if let state {
        seconds[state, default: 0] += max(0, time - stateSince)
      }
      if seconds[next] == nil {
        seconds[next] = 0
        order.append(next)
      }
      state = next
      stateSince = time
    }
    func noteCapacity(_ capacity: Int64) {
      if firstCapacity == nil { firstCapacity = capacity }
      lastCapacity = capacity
      smallestCapacity = min(smallestCapacity ?? capacity, capacity)
      largestCapacity = max(largestCapacity ?? capacity, capacity)
    }
    for event in events {
      switch event {
      case .usage(let usage):
        usageSamples += 1
        noteCapacity(usage.capacity)
        peakUsed = max(peakUsed ?? usage.used, usage.used)
        lastUsed = usage.used
        noSpace = max(noSpace ?? 0, usage.noSpace)
        if state == nil, let sampled = usage.state { enter(sampled, at: usage.time) }
      case .capacity(_, let from, let to, _):
        capacityChanges += 1
        if firstCapacity == nil { noteCapacity(from) }
        noteCapacity(to)
      case .purge(let purge):
        purges += 1
        bytesPurged += purge.bytes
        let key = purge.domain + "/" + purge.reason
        groups[key, default: PurgeGroup(domain: purge.domain, reason: purge.reason, files: 0, bytes: 0)].files += 1
        groups[key]!.bytes += purge.bytes
      case .cost(let cost):
        if cost.recreated {
          recreated += 1
          recreatedBytes += cost.purgedBytes
          if let count = missedPaths[cost.path] { missedPaths[cost.path] = count > 1 ? count - 1 : nil }
        } else {
          missed += 1
          missedPaths[cost.path, default: 0] += 1
        }
        delays.append(cost.secondsSincePurge)
      case .refusal:
        refusals += 1
      case .state(let time, let from, let to):
        stateChanges += 1
        if state == nil { enter(from, at: start ?? time) }
        enter(to, at: time)
      }
    }
    if state != nil, let end { enter(state!, at: end) }
    missedNotRecreated = missedPaths.values.reduce(0, +)
    timeInState = order.map { ($0, seconds[$0] ?? 0) }
    purgeGroups = groups.values.sorted { ($0.domain, $0.reason) < ($1.domain, $1.reason) }
    medianSecondsToCost = Statistics.median(delays)
  }

  public static func == (lhs: ReportSummary, rhs: ReportSummary) -> Bool { lhs.rows == rhs.rows }
  public func hash(into hasher: inout Hasher) { hasher.combine(rows) }
}

/// One line of the summary: the same on the terminal and in the page's table.
public struct SummaryRow: Sendable, Hashable {
  /// A stable key (`purges`, `bytesPurged`…): the page's `data-key`.
  public var key: String
  /// What the line is about.
  public var label: String
  /// The number it states (nil when the log cannot say), exact: the page's `data-value`.
  public var value: Double?
  /// The value for people.
  public var text: String
}

extension ReportSummary {
  /// The summary's lines, in order.
  public var rows: [SummaryRow] {
    func bytes(_ value: Int64?) -> String { value.map { ByteCount($0).formatted } ?? "–" }
    func row(_ key: String, _ label: String, _ value: Double?, _ text: String) -> SummaryRow {
      SummaryRow(key: key, label: label, value: value, text: text)
    }
    var rows = [
      row("duration", "Duration", duration, Statistics.seconds(duration)),
      row("events", "Events", Double(events), "\(events) (\(usageSamples) usage samples)"),
      row(
        "capacity", "Capacity at the end", lastCapacity.map(Double.init),
        bytes(lastCapacity)
          + (capacityChanges > 0
            ? " (from \(bytes(firstCapacity)); \(capacityChanges) change\(capacityChanges == 1 ? "" : "s"), \(bytes(smallestCapacity))–\(bytes(largestCapacity)))"
            : "")),
      row("peakUsed", "Peak usage", peakUsed.map(Double.init), bytes(peakUsed)),
      row("lastUsed", "Usage at the end", lastUsed.map(Double.init), bytes(lastUsed)),
      row("purges", "Files purged", Double(purges), "\(purges)"),
      row("bytesPurged", "Bytes purged", Double(bytesPurged), bytes(bytesPurged)),
    ]
    for group in purgeGroups {
      rows.append(
        row(
          "purged.\(group.domain).\(group.reason)", "  \(group.domain), \(group.reason)", Double(group.bytes),
          "\(group.files) file\(group.files == 1 ? "" : "s"), \(bytes(group.bytes))"))
    }
    rows += [
      row(
        "purgeCost", "Purge cost (purged names paid for)", Double(purgeCost),
        "\(purgeCost)" + (medianSecondsToCost.map { ", median \(Statistics.seconds($0)) after the purge" } ?? "")),
      row("recreated", "Purged files created again", Double(recreated), "\(recreated)"),
      row("recreatedBytes", "Bytes re-created (as purged)", Double(recreatedBytes), bytes(recreatedBytes)),
      row("missed", "Purged names looked up and missed", Double(missed), "\(missed)"),
      row("refusals", "Data Protection refusals", Double(refusals), "\(refusals)"),
      row("noSpace", "ENOSPC refusals", noSpace.map(Double.init), noSpace.map { "\($0)" } ?? "– (no usage samples)"),
      row(
        "stateChanges", "Lock state changes", Double(stateChanges),
        "\(stateChanges)"
          + (timeInState.isEmpty
            ? ""
            : " (" + timeInState.map { "\($0.state) \(Statistics.seconds($0.seconds))" }.joined(separator: ", ") + ")")
      ),
    ]
    return rows
  }

  /// The summary for a terminal: one aligned line per row.
  public var text: String {
    let rows = rows
    let width = rows.map(\.label.count).max() ?? 0
    return rows.map { $0.label.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.text }
      .joined(separator: "\n")
  }
}

/// Small numeric helpers shared by reports and experiments.
public enum Statistics {
  /// The median (the mean of the two middle values for an even count); nil when empty.
  public static func median(_ values: [Double]) -> Double? {
    guard !values.isEmpty else { return nil }
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
  }

  /// Seconds for people: `0.25 s`, `12.3 s`, `2 min 5 s`.
  public static func seconds(_ value: Double) -> String {
    if value < 10 { return "\(rounded(value, digits: 2)) s" }
    if value < 120 { return "\(rounded(value, digits: 1)) s" }
    let whole = Int(value.rounded())
    return "\(whole / 60) min \(whole % 60) s"
  }

  /// `value` with at most `digits` decimals, without trailing zeros (`1.5`, `2`).
  public static func rounded(_ value: Double, digits: Int) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let scaled = (value * scale).rounded()
    let whole = Int64(scaled / scale)
    var fraction = Int64(abs(scaled) - abs(Double(whole)) * scale)
    if fraction == 0 { return "\(scaled < 0 && whole == 0 ? "-" : "")\(whole)" }
    var decimals = digits
    while fraction % 10 == 0 {
      fraction /= 10
      decimals -= 1
    }
    let padded = String(repeating: "0", count: max(0, decimals - String(fraction).count)) + String(fraction)
    return "\(scaled < 0 && whole == 0 ? "-" : "")\(whole).\(padded)"
  }
}
