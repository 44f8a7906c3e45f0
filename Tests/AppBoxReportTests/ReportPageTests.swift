import AppBoxEvents
import Foundation
import Testing

@testable import AppBoxReport

#if canImport(FoundationXML)
  import FoundationXML
#endif

/// Collects what an XML parser saw of a page: elements by id, and attributes.
final class PageOutline: NSObject, XMLParserDelegate {
  var ids: [String: String] = [:]
  var elements: [(name: String, attributes: [String: String])] = []
  var error: Error?

  /// Parses `page` as XML; nil when it is not well-formed.
  static func parse(_ page: String) -> PageOutline? {
    let outline = PageOutline()
    let parser = XMLParser(data: Data(page.utf8))
    parser.delegate = outline
    return parser.parse() ? outline : nil
  }

  func parser(
    _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
    attributes: [String: String] = [:]
  ) {
    elements.append((name, attributes))
    if let id = attributes["id"] { ids[id] = name }
  }

  /// The attributes of elements named `name` with `attribute` equal to `value`.
  func elements(_ name: String, where attribute: String, is value: String) -> [[String: String]] {
    elements.filter { $0.name == name && $0.attributes[attribute] == value }.map(\.attributes)
  }
}

@Suite("ReportPage")
struct ReportPageTests {
  let parsed = EventLogParser.parse(ReportFixtures.log)

  @Test("the page is well-formed XML with every chart, and no script")
  func wellFormed() throws {
    let page = ReportPage.html(parsed, source: "/mnt/<sandbox> & co")
    let outline = try #require(PageOutline.parse(page))
    for id in ["timeline", "purges", "cost", "cost-bytes", "states"] { #expect(outline.ids[id] == "svg", "\(id)") }
    #expect(outline.ids["used-line"] == "polyline" && outline.ids["capacity-line"] == "polyline")
    #expect(outline.ids["summary"] == "table")
    #expect(!page.contains("<script"))
    #expect(!page.contains("src=") && !page.contains("href="))
    #expect(page.contains("/mnt/&lt;sandbox&gt; &amp; co"))
    // A purged name with markup in it stays text (in a mark's title).
    #expect(!page.contains("Caches/<b>"))
  }

  @Test("the table's values are the summary's, and the marks add up to the events")
  func numbers() throws {
    let outline = try #require(PageOutline.parse(ReportPage.html(parsed, source: "log")))
    let summary = ReportSummary(parsed.events)
    for row in summary.rows {
      let cells = outline.elements("td", where: "data-key", is: row.key)
      #expect(cells.count == 1, "\(row.key)")
      #expect(cells.first?["data-value"] == row.value.map(Markup.number), "\(row.key)")
    }
    let purgeMarks = outline.elements.filter { $0.attributes["class"] == "mark purges" }
    #expect(purgeMarks.compactMap { Double($0.attributes["data-bytes"] ?? "") }.reduce(0, +) == 2_883_584)
    let noSpaceMarks = outline.elements.filter { $0.attributes["class"] == "mark ENOSPC" }
    #expect(noSpaceMarks.compactMap { Int($0.attributes["data-count"] ?? "") }.reduce(0, +) == 5)
    let bars = outline.elements.filter { $0.attributes["class"] == "bar" }
    #expect(bars.first { $0.attributes["data-key"] == "purged.caches.shrink" }?.attributes["data-value"] == "262144")
    let spans = outline.elements.filter { $0.attributes["class"] == "span" }.compactMap { $0.attributes["data-label"] }
    #expect(spans == ["UNLOCKED", "GRACE", "LOCKED", "UNLOCKED"])
  }

  @Test("names with markup or control characters stay text and keep the page well-formed")
  func hostileNames() throws {
    // The schema refuses unknown domains and reasons: names come only from paths, mount
    // ids and the source.
    let log = """
      {"type":"log","version":1,"mount":"</svg>]]>","time":1,"segment":0}
      {"type":"usage","time":1,"used":1,"capacity":2,"caches":0,"tmp":0,"purges":0,"bytesPurged":0,"noSpace":0,"state":"UNLOCKED","reason":"mount"}
      {"type":"purge","time":2,"path":"Library/Caches/</svg><script>alert(1)</script>\\u0001","bytes":4096,"domain":"caches","reason":"explicit","lastUse":1}
      {"type":"log","version":1,"mount":"<script>","time":2,"segment":0}
      {"type":"future</svg>","time":2}
      """
    let page = ReportPage.html(EventLogParser.parse(log), source: "</title>\"'&")
    #expect(PageOutline.parse(page) != nil)
    #expect(!page.contains("<script"))
    #expect(page.contains("&lt;/title&gt;&quot;&#39;&amp;"))
  }

  @Test("an empty log still makes a page")
  func empty() throws {
    let page = ReportPage.html(EventLogParser.parse(""), source: "empty")
    let outline = try #require(PageOutline.parse(page))
    #expect(outline.ids["timeline"] == "svg")
    #expect(page.contains("no usage samples"))
  }
}

@Suite("Experiment results")
struct ExperimentResultTests {
  /// A run whose log says `purges` files of 1 MiB were purged and `recreated` created again.
  func run(_ capacity: Int64, _ index: Int, purges: Int, recreated: Int, status: Int32 = 0, seconds: Double = 1)
    -> ExperimentRun
  {
    func sample(_ time: Double, noSpace: Int, _ reason: UsageEvent.Reason) -> AppBoxEvent {
      .usage(
        UsageEvent(
          time: time,
          sample: UsageSample(
            used: 0, capacity: capacity, caches: 0, tmp: 0, purges: 0, bytesPurged: 0, noSpace: noSpace),
          state: .unlocked, reason: reason))
    }
    var events: [AppBoxEvent] = [sample(0, noSpace: 0, .mount)]
    for index in 0..<purges {
      events.append(
        .purge(
          PurgeEvent(
            time: 1, pathBytes: Array("Library/Caches/\(index)".utf8), bytes: 1 << 20, domain: .caches,
            reason: .pressure, lastUse: 0)))
    }
    for index in 0..<recreated {
      events.append(
        .purgeCost(
          PurgeCostEvent(
            kind: .recreated, time: 2, path: Array("Library/Caches/\(index)".utf8), purgedBytes: 1 << 20,
            secondsSincePurge: 1)))
    }
    events.append(sample(3, noSpace: index, .unmount))
    return ExperimentRun(
      capacity: capacity, run: index, exitStatus: status, seconds: seconds, summary: ReportSummary(events))
  }

  @Test("rows group runs by capacity in order and take medians")
  func medians() {
    let rows = ExperimentRow.rows([
      run(32 << 20, 1, purges: 10, recreated: 8, seconds: 3), run(64 << 20, 1, purges: 2, recreated: 1),
      run(32 << 20, 2, purges: 12, recreated: 6, status: 1, seconds: 1),
      run(32 << 20, 3, purges: 11, recreated: 7, seconds: 2),
    ])
    #expect(rows.map(\.capacity) == [32 << 20, 64 << 20])
    #expect(rows[0].runs.count == 3)
    #expect(rows[0].purgeCost == 7 && rows[0].bytesPurged == Double(11 << 20) && rows[0].seconds == 2)
    #expect(rows[0].noSpace == 2)
    #expect(rows[0].exitStatuses == "0/1")
    #expect(rows[1].purgeCost == 1 && rows[1].exitStatuses == "0")
    let text = ExperimentTable.text(rows)
    let lines = text.split(separator: "\n")
    #expect(lines.count == 3)
    #expect(lines[1].hasPrefix("32 MiB") && lines[1].contains("11 MiB") && lines[1].contains(" 7 "))
    #expect(lines.map(\.count).allSatisfy { $0 == lines[0].count })
  }

  @Test("the page has the curve, one point per capacity, and the table's numbers")
  func page() throws {
    let rows = ExperimentRow.rows([
      run(32 << 20, 1, purges: 10, recreated: 8), run(64 << 20, 1, purges: 4, recreated: 3),
      run(128 << 20, 1, purges: 0, recreated: 0),
    ])
    let page = ExperimentPage.html(rows, command: ["python3", "work<load>.py"])
    let outline = try #require(PageOutline.parse(page))
    #expect(outline.ids["curve"] == "svg" && outline.ids["cost-curve"] == "polyline")
    let points = outline.elements.filter { $0.attributes["data-series"] == "cost-curve" }
    #expect(points.compactMap { $0.attributes["data-y"] } == ["8", "3", "0"])
    #expect(points.compactMap { $0.attributes["data-x"] } == ["\(32 << 20)", "\(64 << 20)", "\(128 << 20)"])
    #expect(
      outline.elements("td", where: "data-key", is: "purgeCost").compactMap { $0["data-value"] } == ["8", "3", "0"])
    #expect(page.contains("work&lt;load&gt;.py"))
  }

  @Test("policies compared: a policy column, one row and one curve per policy and capacity")
  func policies() throws {
    var runs: [ExperimentRun] = []
    for (policy, cost) in [("lru", 3), ("fifo", 5)] {
      for capacity: Int64 in [32 << 20, 64 << 20] {
        var run = run(capacity, 1, purges: cost, recreated: capacity == 32 << 20 ? cost : 0)
        run.policy = policy
        runs.append(run)
      }
    }
    let rows = ExperimentRow.rows(runs)
    #expect(rows.count == 4 && ExperimentRow.policies(rows) == ["lru", "fifo"])
    #expect(ExperimentTable.headers(rows)[1] == "policy")
    #expect(ExperimentTable.text(rows).split(separator: "\n")[3].contains("fifo"))
    let outline = try #require(PageOutline.parse(ExperimentPage.html(rows, command: ["p"])))
    #expect(outline.ids["cost-curve-lru"] == "polyline" && outline.ids["cost-curve-fifo"] == "polyline")
    let fifo = outline.elements.filter { $0.attributes["data-series"] == "cost-curve-fifo" }
    #expect(fifo.compactMap { $0.attributes["data-y"] } == ["5", "0"])
  }
}
