import AppBoxEvents
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
  /// Data Protection refusals (a coalesced event counts all it stands for).
  public var refusals = 0
  /// Files whose stored class could not be used (counted as `complete`), each once.
  public var unreadableClasses = 0
  /// ENOSPC refusals (the last usage sample's count; nil when the log has no samples).
  public var noSpace: Int?
  /// Lock state changes, and seconds spent in each state (from the first to the last
  /// event), in the order first seen.
  public var stateChanges = 0
  public var timeInState: [(state: String, seconds: Double)] = []

  /// Missed lookups of names the app did not create again afterwards.
  public var missedNotRecreated = 0

  /// On a device: each container's figures, by id (empty for a plain mount's log).
  public var containers: [ContainerSummary] = []
  /// On a device: bytes purged from one container's caches for another's allocations.
  public var paidFor: [PaidFor] = []

  /// The purge cost: how many purged names the app paid for, each once: created again,
  /// or looked up and missed and not created again (a lookup that misses and the
  /// create that follows are one re-fetch).
  public var purgeCost: Int { recreated + missedNotRecreated }

  /// Seconds from the first event to the last.
  public var duration: Double { (start != nil && end != nil) ? end! - start! : 0 }

  /// Aggregates `events` (in time order, as ``EventLogParser`` returns them). Sums
  /// saturate: no log, however hostile, overflows them.
  public init(_ events: [AppBoxEvent]) {
    let events = events.filter { !$0.isLogStructure }
    self.events = events.count
    start = events.first?.time
    end = events.last?.time
    var groups: [String: PurgeGroup] = [:]
    var delays: [Double] = []
    var missedPaths: [[UInt8]: Int] = [:]
    var state: String?
    var stateSince = start ?? 0
    var tally = ContainerTally()
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
        noteCapacity(usage.sample.capacity)
        peakUsed = max(peakUsed ?? usage.sample.used, usage.sample.used)
        lastUsed = usage.sample.used
        noSpace = max(noSpace ?? 0, usage.sample.noSpace)
        if state == nil { enter(usage.state.name, at: usage.time) }
      case .capacity(let change):
        capacityChanges += 1
        if firstCapacity == nil { noteCapacity(change.from) }
        noteCapacity(change.to)
      case .purge(let purge):
        tally.purge(purge)
        purges += 1
        bytesPurged = Statistics.sum(bytesPurged, purge.bytes)
        let key = purge.domain.machineName + "/" + purge.reason.rawValue
        var group =
          groups[key] ?? PurgeGroup(domain: purge.domain.machineName, reason: purge.reason.rawValue, files: 0, bytes: 0)
        group.files += 1
        group.bytes = Statistics.sum(group.bytes, purge.bytes)
        groups[key] = group
      case .purgeCost(let cost):
        tally.cost(cost)
        switch cost.kind {
        case .recreated:
          recreated += 1
          recreatedBytes = Statistics.sum(recreatedBytes, cost.purgedBytes)
          if let count = missedPaths[cost.path] { missedPaths[cost.path] = count > 1 ? count - 1 : nil }
        case .missed:
          missed += 1
          missedPaths[cost.path, default: 0] += 1
        }
        delays.append(cost.secondsSincePurge)
      case .refusal(let refusal):
        tally.refusal(refusal)
        refusals = Statistics.sum(refusals, refusal.count)
      case .unreadableClass:
        unreadableClasses += 1
      case .confinement:
        break  // an app's reach, not storage: appbox status counts them
      case .state(let change):
        stateChanges += 1
        if state == nil { enter(change.from.name, at: start ?? change.time) }
        enter(change.to.name, at: change.time)
      case .containerUsage(let usage):
        tally.usage(usage)
      case .log, .rotate:
        break
      }
    }
    (containers, paidFor) = tally.finish()
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
      row(
        "unreadableClasses", "Classes unusable (counted as complete)", Double(unreadableClasses),
        "\(unreadableClasses)"),
      row("noSpace", "ENOSPC refusals", noSpace.map(Double.init), noSpace.map { "\($0)" } ?? "– (no usage samples)"),
      row(
        "stateChanges", "Lock state changes", Double(stateChanges),
        "\(stateChanges)"
          + (timeInState.isEmpty
            ? ""
            : " (" + timeInState.map { "\($0.state) \(Statistics.seconds($0.seconds))" }.joined(separator: ", ") + ")")
      ),
    ]
    return rows + deviceRows
  }

  /// On a device, a line per container and per pair of containers where one's caches paid
  /// for the other's writes.
  var deviceRows: [SummaryRow] {
    func bytes(_ value: Int64?) -> String { value.map { ByteCount($0).formatted } ?? "–" }
    var rows: [SummaryRow] = []
    for container in containers {
      var text = (container.kind.map { "\($0): " } ?? "") + "used \(bytes(container.lastUsed)) at the end"
      text += container.peakUsed.map { " (peak \(bytes($0)))" } ?? ""
      text +=
        "; purged \(container.filesPurged) file\(container.filesPurged == 1 ? "" : "s"), \(bytes(container.bytesPurged))"
      if container.bytesForOwnWrites > 0 || container.bytesForOthers > 0 {
        text +=
          " (\(bytes(container.bytesForOwnWrites)) for its own writes, \(bytes(container.bytesForOthers)) for others')"
      }
      if container.bytesOthersPaid > 0 {
        text += "; others' caches paid \(bytes(container.bytesOthersPaid)) for its writes"
      }
      text += "; purge cost \(container.purgeCost); \(container.refusals) refusal\(container.refusals == 1 ? "" : "s")"
      rows.append(
        SummaryRow(
          key: "container.\(container.id)", label: "Container \(container.id)", value: Double(container.bytesPurged),
          text: text))
    }
    for entry in paidFor {
      rows.append(
        SummaryRow(
          key: "paid.\(entry.cache).\(entry.writer)", label: "  \(entry.cache)'s files for \(entry.writer)'s writes",
          value: Double(entry.bytes), text: "\(entry.files) file\(entry.files == 1 ? "" : "s"), \(bytes(entry.bytes))"))
    }
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

  /// Seconds for people: `0.25 s`, `12.3 s`, `2 min 5 s`, `3 d 4 h`; any value (what
  /// no clock reaches is shown, never trapped on).
  public static func seconds(_ value: Double) -> String {
    guard value.isFinite else { return value.isNaN ? "? s" : (value < 0 ? "-∞ s" : "∞ s") }
    if value < 0 { return "-" + seconds(-value) }
    if value < 10 { return "\(rounded(value, digits: 2)) s" }
    if value < 120 { return "\(rounded(value, digits: 1)) s" }
    if value < 2 * 86_400 {
      let whole = Int(value.rounded())
      return "\(whole / 60) min \(whole % 60) s"
    }
    let hours = int64(value / 3600)
    return "\(hours / 24) d \(hours % 24) h"
  }

  /// `value` with at most `digits` decimals, without trailing zeros or an exponent (`1.5`,
  /// `2`, `9223372036854775808`): any finite value (non-finite: `0`).
  public static func rounded(_ value: Double, digits: Int) -> String {
    guard value.isFinite else { return "0" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    // Beyond 2^52 a Double has no fraction: its integer digits, exactly.
    guard abs(value) < 0x1p52 else { return integerDigits(value.rounded()) }
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

  /// The decimal digits of an integral `Double`, however large.
  static func integerDigits(_ value: Double) -> String {
    if let exact = Int64(exactly: value) { return String(exact) }
    // Its significand times 2^(exponent - 52), in little-endian base-10^9 limbs.
    let base: UInt64 = 1_000_000_000
    let significand = value.significandBitPattern | (1 << 52)
    var limbs: [UInt64] = [significand % base, significand / base]
    for _ in 0..<max(0, Int(value.exponent) - 52) {
      var carry: UInt64 = 0
      for index in limbs.indices {
        let doubled = limbs[index] * 2 + carry
        limbs[index] = doubled % base
        carry = doubled / base
      }
      if carry > 0 { limbs.append(carry) }
    }
    while limbs.count > 1 && limbs.last == 0 { limbs.removeLast() }
    var text = String(limbs.last!)
    for limb in limbs.dropLast().reversed() {
      let digits = String(limb)
      text += String(repeating: "0", count: 9 - digits.count) + digits
    }
    return (value < 0 ? "-" : "") + text
  }

  /// The `Int64` nearest to `value`, clamped (NaN: 0): for byte counts drawn as `Double`s.
  public static func int64(_ value: Double) -> Int64 {
    guard !value.isNaN else { return 0 }
    if value >= 0x1p63 { return .max }
    if value <= -0x1p63 { return .min }
    return Int64(value.rounded())
  }

  /// `a + b`, saturating at the type's bounds.
  public static func sum<T: FixedWidthInteger>(_ a: T, _ b: T) -> T {
    let (total, overflow) = a.addingReportingOverflow(b)
    guard overflow else { return total }
    return b > 0 ? .max : .min
  }
}
