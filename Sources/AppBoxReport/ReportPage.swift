import AppBoxEvents
import SandboxPolicy

/// `appbox report`'s page: a self-contained XHTML-compatible document with inline SVG
/// charts and the summary table, made from an event log.
public enum ReportPage {
  /// Colours of the lock states, and of the marks.
  static let stateColors = ["UNLOCKED": "#9bd39b", "GRACE": "#f2d46b", "LOCKED": "#e0867a", "BFU": "#9aa7d8"]
  static let purgeColor = "#d9534f"
  static let costColor = "#8e44ad"
  static let noSpaceColor = "#000000"

  /// The page for `parsed`, titled with `source` (a mountpoint or a file name).
  public static func html(_ parsed: EventLogParser.Parsed, source: String) -> String {
    let summary = ReportSummary(parsed.events)
    let timeline = ReportTimeline(parsed.events)
    let seconds: (Double) -> String = { Statistics.seconds($0) }
    let bytes: (Double) -> String = { ByteCount(Statistics.int64($0)).formatted }
    var body = Markup.text("h1", [], "AppBox report: \(source)")
    body += Markup.text(
      "p", [("class", "note")],
      "\(summary.events) events over \(Statistics.seconds(summary.duration))"
        + parsed.notes.map { "; " + $0 }.joined()
        + (summary.usageSamples == 0 ? "; the log has no usage samples (a mount older than usage events?)" : ""))

    body += Markup.text("h2", [], "Used bytes against capacity")
    let purgeMarks = timeline.binned(timeline.purges, count: 160).map {
      SVGChart.Mark(
        x: $0.time, title: "\($0.count) purged, \(ByteCount(Statistics.int64($0.sum)).formatted)",
        attributes: [("data-count", "\($0.count)"), ("data-bytes", Markup.number($0.sum))])
    }
    let costMarks = timeline.binned(timeline.costs, count: 160).map {
      SVGChart.Mark(
        x: $0.time,
        title: "\($0.count) re-created or missed (\(ByteCount(Statistics.int64($0.sum)).formatted) when purged)",
        attributes: [("data-count", "\($0.count)"), ("data-bytes", Markup.number($0.sum))])
    }
    let noSpaceMarks = timeline.noSpace.map {
      SVGChart.Mark(
        x: $0.time, title: "\(Statistics.int64($0.value)) ENOSPC",
        attributes: [("data-count", "\(Statistics.int64($0.value))")])
    }
    // The lines run to the last event: the last sample's value holds until then.
    func toEnd(_ points: [ReportTimeline.Point]) -> [(x: Double, y: Double)] {
      var line = points.map { (x: $0.time, y: $0.value) }
      if let last = points.last, last.time < timeline.duration { line.append((timeline.duration, last.value)) }
      return line
    }
    body += SVGChart.lineChart(
      id: "timeline", title: "Used bytes against capacity over time",
      series: [
        .init(
          id: "capacity-line", name: "capacity", color: "#888888", points: toEnd(timeline.capacity),
          stepped: true, dash: "6 3"),
        .init(id: "used-line", name: "used", color: "#1f77b4", points: toEnd(timeline.used), stepped: true),
      ],
      marks: [
        ("purges", purgeColor, purgeMarks), ("cost", costColor, costMarks), ("ENOSPC", noSpaceColor, noSpaceMarks),
      ],
      xLabel: "seconds from the first event", xText: seconds, yText: bytes,
      xDomain: 0...max(timeline.duration, 1e-9))

    body += Markup.text("h2", [], "Purges by domain and reason")
    body += SVGChart.barChart(
      id: "purges", title: "Bytes purged by domain and reason",
      bars: summary.purgeGroups.map {
        SVGChart.Bar(
          label: "\($0.domain), \($0.reason)", value: Double($0.bytes),
          text: "\($0.files) file\($0.files == 1 ? "" : "s"), \(ByteCount($0.bytes).formatted)",
          color: $0.domain == "tmp" ? "#f0ad4e" : "#5bc0de", key: "purged.\($0.domain).\($0.reason)")
      })

    body += Markup.text("h2", [], "Purge cost")
    body += SVGChart.barChart(
      id: "cost",
      title: "What the purges cost the app",
      bars: [
        .init(
          label: "files purged", value: Double(summary.purges), text: "\(summary.purges)", color: purgeColor,
          key: "purges"),
        .init(
          label: "paid for (purge cost)", value: Double(summary.purgeCost), text: "\(summary.purgeCost)",
          color: "#5e2d79", key: "purgeCost"),
        .init(
          label: "created again", value: Double(summary.recreated), text: "\(summary.recreated)", color: costColor,
          key: "recreated"),
        .init(
          label: "looked up and missed", value: Double(summary.missed), text: "\(summary.missed)", color: "#b48ed1",
          key: "missed"),
      ])
    body += SVGChart.barChart(
      id: "cost-bytes",
      title: "Bytes purged and bytes re-created",
      bars: [
        .init(
          label: "bytes purged", value: Double(summary.bytesPurged), text: ByteCount(summary.bytesPurged).formatted,
          color: purgeColor, key: "bytesPurged"),
        .init(
          label: "bytes re-created", value: Double(summary.recreatedBytes),
          text: ByteCount(summary.recreatedBytes).formatted, color: costColor, key: "recreatedBytes"),
      ])

    body += Markup.text("h2", [], "Lock states, refusals, ENOSPC and capacity changes")
    body += SVGChart.laneChart(
      id: "states", title: "Lock states, refusals, ENOSPC and capacity changes over time",
      duration: timeline.duration,
      spans: (
        "lock state",
        timeline.states.map { ($0.start, $0.end, $0.state, stateColors[$0.state] ?? "#cccccc") }
      ),
      lanes: [
        (
          "refusals", "#c0392b",
          timeline.binned(timeline.refusals, count: 160).map {
            SVGChart.Mark(
              x: $0.time, title: "\(Statistics.int64($0.sum)) refusals",
              attributes: [("data-count", "\(Statistics.int64($0.sum))")])
          }
        ),
        ("ENOSPC", noSpaceColor, noSpaceMarks),
        (
          "capacity", "#555555",
          timeline.capacityChanges.map {
            SVGChart.Mark(
              x: $0.time, title: "capacity → \(ByteCount(Statistics.int64($0.value)).formatted)",
              attributes: [("data-capacity", Markup.number($0.value))])
          }
        ),
      ])

    if !summary.containers.isEmpty { body += containersSection(summary) }

    body += Markup.text("h2", [], "Summary")
    body += summaryTable(summary.rows)
    return Markup.page(title: "AppBox report: \(source)", body: body)
  }

  /// A device's containers: bytes purged from each, and who paid for whose writes (a
  /// table: each cell has its `data-cache`, `data-writer` and `data-bytes`).
  static func containersSection(_ summary: ReportSummary) -> String {
    var body = Markup.text("h2", [], "Containers")
    body += SVGChart.barChart(
      id: "containers", title: "Bytes purged from each container",
      bars: summary.containers.map {
        SVGChart.Bar(
          label: $0.id, value: Double($0.bytesPurged),
          text: "\($0.filesPurged) file\($0.filesPurged == 1 ? "" : "s"), \(ByteCount($0.bytesPurged).formatted)",
          color: $0.kind == "group" ? "#2ca02c" : "#5bc0de", key: "container.\($0.id)")
      })
    guard !summary.paidFor.isEmpty else { return body }
    body += Markup.text("h3", [], "Whose caches paid for whose writes")
    let writers = Array(Set(summary.paidFor.map(\.writer))).sorted()
    let caches = Array(Set(summary.paidFor.map(\.cache))).sorted()
    var table = Markup.element(
      "tr", [],
      Markup.text("th", [], "files of ↓ for writes of →")
        + writers.map { Markup.text("th", [("scope", "col")], $0) }.joined())
    for cache in caches {
      var cells = Markup.text("th", [("scope", "row")], cache)
      for writer in writers {
        let entry = summary.paidFor.first { $0.cache == cache && $0.writer == writer }
        cells += Markup.text(
          "td",
          [
            ("class", "number"), ("data-cache", cache), ("data-writer", writer), ("data-bytes", "\(entry?.bytes ?? 0)"),
          ],
          entry.map { "\(ByteCount($0.bytes).formatted) (\($0.files))" } ?? "–")
      }
      table += Markup.element("tr", [], cells)
    }
    return body + Markup.element("table", [("id", "paid-for")], table)
  }

  /// The summary rows as a table; each value cell has the row's `data-key` and, when the
  /// log states it, its exact `data-value`.
  public static func summaryTable(_ rows: [SummaryRow]) -> String {
    var cells = ""
    for row in rows {
      var attributes = [("class", "number"), ("data-key", row.key)]
      if let value = row.value { attributes.append(("data-value", Markup.number(value))) }
      cells += Markup.element(
        "tr", [], Markup.text("th", [("scope", "row")], row.label) + Markup.text("td", attributes, row.text))
    }
    return Markup.element("table", [("id", "summary")], Markup.element("tbody", [], cells))
  }
}
