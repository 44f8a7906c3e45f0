import Foundation
import SandboxPolicy

/// One run of `appbox experiment`: a program at one capacity, and what its event log
/// says.
public struct ExperimentRun: Sendable {
  /// The sandbox's capacity in bytes.
  public var capacity: Int64
  /// The purge policy it was mounted with, when the experiment compares them.
  public var policy: String?
  /// Which run at this capacity (from 1).
  public var run: Int
  /// The program's exit status (128+N for signal N).
  public var exitStatus: Int32
  /// Wall-clock seconds the program ran.
  public var seconds: Double
  /// The run's event log, aggregated.
  public var summary: ReportSummary
  /// On a device: each app's exit status, in the order the apps were given.
  public var appStatuses: [(app: String, status: Int32)] = []

  /// Creates a run.
  public init(
    capacity: Int64, policy: String? = nil, run: Int, exitStatus: Int32, seconds: Double, summary: ReportSummary
  ) {
    self.capacity = capacity
    self.policy = policy
    self.run = run
    self.exitStatus = exitStatus
    self.seconds = seconds
    self.summary = summary
  }
}

/// One capacity's runs (with one purge policy), with the medians `appbox experiment` prints.
public struct ExperimentRow: Sendable {
  /// The capacity in bytes.
  public var capacity: Int64
  /// The purge policy, when the experiment compares them.
  public var policy: String?
  /// The runs at this capacity.
  public var runs: [ExperimentRun]

  /// The median over the runs of `value`.
  public func median(_ value: (ExperimentRun) -> Double) -> Double {
    Statistics.median(runs.map(value)) ?? 0
  }

  /// Median bytes purged.
  public var bytesPurged: Double { median { Double($0.summary.bytesPurged) } }
  /// Median purge cost (``ReportSummary/purgeCost``).
  public var purgeCost: Double { median { Double($0.summary.purgeCost) } }
  /// Median bytes re-created (as purged).
  public var recreatedBytes: Double { median { Double($0.summary.recreatedBytes) } }
  /// Median ENOSPC refusals.
  public var noSpace: Double { median { Double($0.summary.noSpace ?? 0) } }
  /// Median run time in seconds.
  public var seconds: Double { median(\.seconds) }
  /// On a device: each container seen in any run, by id, with the medians over the runs
  /// of what was purged from it, what of that paid for others' writes, what others'
  /// caches paid for its writes and its purge cost (a run without it counts 0), and its
  /// exit statuses when it is an app that ran.
  public var containers: [ContainerMedians] {
    let ids = Set(runs.flatMap { $0.summary.containers.map(\.id) }).sorted()
    return ids.map { id in
      func value(_ figure: (ContainerSummary) -> Double) -> Double {
        median { run in run.summary.containers.first { $0.id == id }.map(figure) ?? 0 }
      }
      var seen: [Int32] = []
      for run in runs {
        for (app, status) in run.appStatuses where app == id && !seen.contains(status) { seen.append(status) }
      }
      return ContainerMedians(
        id: id, kind: runs.lazy.compactMap { $0.summary.containers.first { $0.id == id }?.kind }.first,
        bytesPurged: value { Double($0.bytesPurged) }, bytesForOthers: value { Double($0.bytesForOthers) },
        bytesOthersPaid: value { Double($0.bytesOthersPaid) }, purgeCost: value { Double($0.purgeCost) },
        exitStatuses: seen.map(String.init).joined(separator: "/"))
    }
  }

  /// On a device: the medians over the runs of bytes purged from one container's caches
  /// for another's writes (pairs seen in any run).
  public var paidFor: [(cache: String, writer: String, bytes: Double)] {
    let pairs = Set(runs.flatMap { $0.summary.paidFor.map { [$0.cache, $0.writer] } }).sorted {
      $0.lexicographicallyPrecedes($1)
    }
    return pairs.map { pair in
      (
        pair[0], pair[1],
        median { run in Double(run.summary.paidFor.first { [$0.cache, $0.writer] == pair }?.bytes ?? 0) }
      )
    }
  }

  /// The runs' exit statuses, distinct, in order (`0`, or `0/1` when they differ).
  public var exitStatuses: String {
    var seen: [Int32] = []
    for run in runs where !seen.contains(run.exitStatus) { seen.append(run.exitStatus) }
    return seen.map(String.init).joined(separator: "/")
  }

  /// Groups runs by capacity and policy, in the order they were first run.
  public static func rows(_ runs: [ExperimentRun]) -> [ExperimentRow] {
    var rows: [ExperimentRow] = []
    for run in runs {
      if let index = rows.firstIndex(where: { $0.capacity == run.capacity && $0.policy == run.policy }) {
        rows[index].runs.append(run)
      } else {
        rows.append(ExperimentRow(capacity: run.capacity, policy: run.policy, runs: [run]))
      }
    }
    return rows
  }

  /// The policies of `rows`, in order of appearance (empty when none was chosen).
  public static func policies(_ rows: [ExperimentRow]) -> [String] {
    var seen: [String] = []
    for policy in rows.compactMap(\.policy) where !seen.contains(policy) { seen.append(policy) }
    return seen
  }
}

/// One container's medians over a capacity's runs (``ExperimentRow/containers``).
public struct ContainerMedians: Sendable, Hashable {
  /// The bundle or group id, and `app` or `group`.
  public var id: String
  public var kind: String?
  /// Medians: bytes purged from it, of those for others' writes, bytes others' caches
  /// paid for its writes, its purge cost.
  public var bytesPurged: Double
  public var bytesForOthers: Double
  public var bytesOthersPaid: Double
  public var purgeCost: Double
  /// An app's exit statuses (`0`, `0/1`), empty for a group.
  public var exitStatuses: String
}

/// `appbox experiment`'s table, for a terminal.
public enum ExperimentTable {
  /// The columns' headers (with a policy column when the rows compare policies).
  public static func headers(_ rows: [ExperimentRow]) -> [String] {
    ["capacity"] + (ExperimentRow.policies(rows).isEmpty ? [] : ["policy"])
      + ["runs", "purged", "purge cost", "re-created", "ENOSPC", "exit", "time"]
  }

  /// One row's cells, as printed (and as the page's table shows them).
  public static func cells(_ row: ExperimentRow) -> [String] {
    [ByteCount(row.capacity).formatted] + (row.policy.map { [$0] } ?? []) + [
      "\(row.runs.count)", ByteCount(Statistics.int64(row.bytesPurged)).formatted,
      Statistics.rounded(row.purgeCost, digits: 1), ByteCount(Statistics.int64(row.recreatedBytes)).formatted,
      Statistics.rounded(row.noSpace, digits: 1), row.exitStatuses, Statistics.seconds(row.seconds),
    ]
  }

  /// A device experiment's second table: per capacity (and policy), a line per container.
  public static func containersText(_ rows: [ExperimentRow]) -> String {
    let headers =
      ["capacity"] + (ExperimentRow.policies(rows).isEmpty ? [] : ["policy"])
      + ["container", "exit", "purged from it", "paid for others", "others paid for it", "purge cost"]
    var lines = [headers]
    for row in rows {
      for container in row.containers {
        lines.append(
          [ByteCount(row.capacity).formatted] + (row.policy.map { [$0] } ?? []) + [
            container.id, container.exitStatuses.isEmpty ? "–" : container.exitStatuses,
            ByteCount(Statistics.int64(container.bytesPurged)).formatted,
            ByteCount(Statistics.int64(container.bytesForOthers)).formatted,
            ByteCount(Statistics.int64(container.bytesOthersPaid)).formatted,
            Statistics.rounded(container.purgeCost, digits: 1),
          ])
      }
    }
    return aligned(lines, leftColumns: ExperimentRow.policies(rows).isEmpty ? [0, 1] : [0, 1, 2])
  }

  /// The table: a header and one line per capacity, columns aligned (numbers right).
  public static func text(_ rows: [ExperimentRow]) -> String {
    aligned([headers(rows)] + rows.map(cells), leftColumns: [0])
  }

  /// `lines` in aligned columns: those in `leftColumns` to the left, the others (numbers)
  /// to the right.
  static func aligned(_ lines: [[String]], leftColumns: Set<Int>) -> String {
    let headers = lines[0]
    let widths = headers.indices.map { column in lines.map { $0[column].count }.max() ?? 0 }
    return lines.map { line in
      line.indices.map { column in
        let cell = line[column]
        let pad = String(repeating: " ", count: widths[column] - cell.count)
        return leftColumns.contains(column) ? cell + pad : pad + cell
      }.joined(separator: "  ")
    }.joined(separator: "\n")
  }
}

/// `appbox experiment`'s page: purge cost against capacity, and the table.
public enum ExperimentPage {
  /// The page for `rows`; `command` is the program and its arguments, for the title.
  public static func html(_ rows: [ExperimentRow], command: [String]) -> String {
    let commandText = command.joined(separator: " ")
    let capacity: (Double) -> String = { ByteCount(Statistics.int64($0)).formatted }
    var body = Markup.text("h1", [], "AppBox experiment: \(commandText)")
    let runs = rows.map(\.runs.count).max() ?? 0
    body += Markup.text(
      "p", [("class", "note")],
      "\(rows.count) capacities, \(runs) run\(runs == 1 ? "" : "s") each, every run on a fresh copy of the sandbox; medians over the runs. Purge cost: the purged names the program paid for, each once: created again, or looked up and missed and never created again."
    )
    // One curve per policy (one in all without policies); ids get the policy's name.
    let policies: [String?] = ExperimentRow.policies(rows).isEmpty ? [nil] : ExperimentRow.policies(rows)
    let colors = ["#8e44ad", "#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#17becf"]
    let logX = Set(rows.map(\.capacity)).count > 1
    func curves(
      _ id: String, _ name: String, _ value: (ExperimentRow) -> Double, colorOffset: Int = 0
    ) -> [SVGChart.Series] {
      policies.enumerated().map { index, policy in
        SVGChart.Series(
          id: id + (policy.map { "-" + $0 } ?? ""), name: name + (policy.map { " (\($0))" } ?? " (median)"),
          color: colors[(index + colorOffset) % colors.count],
          points: rows.filter { $0.policy == policy }.map { (Double($0.capacity), value($0)) }, dots: true)
      }
    }
    body += Markup.text("h2", [], "Purge cost against capacity")
    body += SVGChart.lineChart(
      id: "curve", title: "Purge cost against capacity", series: curves("cost-curve", "purge cost", \.purgeCost),
      xLabel: "capacity", xText: capacity, yText: { Statistics.rounded($0, digits: 1) }, logX: logX)
    body += Markup.text("h2", [], "Bytes purged and re-created against capacity")
    body += SVGChart.lineChart(
      id: "bytes-curve", title: "Bytes purged and re-created against capacity",
      series: curves("purged-curve", "bytes purged", \.bytesPurged, colorOffset: 3)
        + curves("recreated-curve", "bytes re-created", \.recreatedBytes),
      xLabel: "capacity", xText: capacity, yText: { ByteCount(Statistics.int64($0)).formatted }, logX: logX)
    body += Markup.text("h2", [], "Table")
    var table = Markup.element(
      "tr", [], ExperimentTable.headers(rows).map { Markup.text("th", [("class", "number")], $0) }.joined())
    let hasPolicy = policies != [nil]
    let keys =
      ["capacity"] + (hasPolicy ? ["policy"] : [])
      + ["runs", "bytesPurged", "purgeCost", "recreatedBytes", "noSpace", "exit", "seconds"]
    for row in rows {
      let values: [Double?] =
        [Double(row.capacity)] + (hasPolicy ? [nil] : [])
        + [Double(row.runs.count), row.bytesPurged, row.purgeCost, row.recreatedBytes, row.noSpace, nil, row.seconds]
      var cells = ""
      for (index, cell) in ExperimentTable.cells(row).enumerated() {
        var attributes = [("class", "number"), ("data-key", keys[index])]
        if let value = values[index] { attributes.append(("data-value", Markup.number(value))) }
        cells += Markup.text("td", attributes, cell)
      }
      table += Markup.element(
        "tr", [("data-capacity", "\(row.capacity)")] + (row.policy.map { [("data-policy", $0)] } ?? []), cells)
    }
    body += Markup.element("table", [("id", "experiment")], table)
    if rows.contains(where: { !$0.containers.isEmpty }) { body += containersSection(rows, logX: logX) }
    return Markup.page(title: "AppBox experiment: \(commandText)", body: body)
  }

  /// A device experiment's containers: bytes purged from each against capacity, a table
  /// per container (every cell with its `data-key` and `data-value`) and who paid for
  /// whose writes (`data-cache`, `data-writer`, `data-bytes`).
  static func containersSection(_ rows: [ExperimentRow], logX: Bool) -> String {
    let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
    let ids = Array(Set(rows.flatMap { $0.containers.map(\.id) })).sorted()
    var body = Markup.text("h2", [], "Bytes purged from each container against capacity")
    body += SVGChart.lineChart(
      id: "container-curves", title: "Bytes purged from each container against capacity",
      series: ids.enumerated().map { index, id in
        SVGChart.Series(
          id: "purged-\(index)", name: id, color: colors[index % colors.count],
          points: rows.filter { $0.policy == nil || $0.policy == rows.first?.policy }.map { row in
            (Double(row.capacity), row.containers.first { $0.id == id }?.bytesPurged ?? 0)
          }, dots: true)
      },
      xLabel: "capacity", xText: { ByteCount(Statistics.int64($0)).formatted },
      yText: { ByteCount(Statistics.int64($0)).formatted }, logX: logX)
    body += Markup.text("h2", [], "Containers")
    var table = Markup.element(
      "tr", [],
      [
        "capacity", "policy", "container", "exit", "purged from it", "paid for others", "others paid for it",
        "purge cost",
      ]
      .map { Markup.text("th", [], $0) }.joined())
    for row in rows {
      for container in row.containers {
        let cells: [(String, String, Double?)] = [
          ("capacity", ByteCount(row.capacity).formatted, Double(row.capacity)),
          ("policy", row.policy ?? "", nil), ("container", container.id, nil),
          ("exit", container.exitStatuses, nil),
          ("bytesPurged", ByteCount(Statistics.int64(container.bytesPurged)).formatted, container.bytesPurged),
          ("bytesForOthers", ByteCount(Statistics.int64(container.bytesForOthers)).formatted, container.bytesForOthers),
          (
            "bytesOthersPaid", ByteCount(Statistics.int64(container.bytesOthersPaid)).formatted,
            container.bytesOthersPaid
          ),
          ("purgeCost", Statistics.rounded(container.purgeCost, digits: 1), container.purgeCost),
        ]
        table += Markup.element(
          "tr", [("data-capacity", "\(row.capacity)"), ("data-container", container.id)],
          cells.map { key, text, value in
            Markup.text("td", [("data-key", key)] + (value.map { [("data-value", Markup.number($0))] } ?? []), text)
          }.joined())
      }
    }
    body += Markup.element("table", [("id", "containers")], table)
    body += Markup.text("h2", [], "Whose caches paid for whose writes")
    var paid = Markup.element(
      "tr", [], ["capacity", "policy", "files of", "for writes of", "bytes"].map { Markup.text("th", [], $0) }.joined())
    for row in rows {
      for entry in row.paidFor {
        paid += Markup.element(
          "tr", [],
          Markup.text("td", [], ByteCount(row.capacity).formatted) + Markup.text("td", [], row.policy ?? "")
            + Markup.text("td", [], entry.cache) + Markup.text("td", [], entry.writer)
            + Markup.text(
              "td",
              [
                ("class", "number"), ("data-capacity", "\(row.capacity)"), ("data-cache", entry.cache),
                ("data-writer", entry.writer), ("data-bytes", Markup.number(entry.bytes)),
              ], ByteCount(Statistics.int64(entry.bytes)).formatted))
      }
    }
    return body + Markup.element("table", [("id", "paid-for")], paid)
  }
}
