import AppBoxEvents
import Foundation
import Testing

@testable import AppBoxReport

/// A device's log in a report and an experiment: every purge, refusal and usage figure
/// under its container, and whose caches paid for whose writes.
@Suite("Reports of a device")
struct DeviceReportTests {
  static let a = "Containers/Data/Application/com.example.a"
  static let b = "Containers/Data/Application/com.example.b"
  static let group = "Containers/Shared/AppGroup/group.example"

  /// A device's log: b writes, purging a's tmp and the group's cache; a writes, purging its
  /// own cache; an explicit purge of b's cache; a refusal in the group; usage lines; a's
  /// purged name missed then created again, b's missed only.
  static let log = """
    {"type":"usage","time":100,"used":3000,"capacity":4000,"caches":2000,"tmp":1000,"purges":0,"bytesPurged":0,"noSpace":0,"state":"UNLOCKED","reason":"mount"}
    {"type":"containerUsage","time":100,"container":"com.example.a","kind":"app","used":1500,"caches":500,"tmp":1000,"reason":"mount"}
    {"type":"containerUsage","time":100,"container":"com.example.b","kind":"app","used":500,"caches":500,"tmp":0,"reason":"mount"}
    {"type":"containerUsage","time":100,"container":"group.example","kind":"group","used":1000,"caches":1000,"tmp":0,"reason":"mount"}
    {"type":"purge","time":101,"path":"\(a)/tmp/t","bytes":1000,"domain":"tmp","reason":"pressure","lastUse":90,"container":"com.example.a","requester":"com.example.b"}
    {"type":"purge","time":101,"path":"\(group)/Library/Caches/g","bytes":600,"domain":"caches","reason":"pressure","lastUse":91,"container":"group.example","requester":"com.example.b"}
    {"type":"purge","time":102,"path":"\(a)/Library/Caches/c","bytes":400,"domain":"caches","reason":"pressure","lastUse":92,"container":"com.example.a","requester":"com.example.a"}
    {"type":"purge","time":103,"path":"\(b)/Library/Caches/d","bytes":300,"domain":"caches","reason":"explicit","lastUse":93,"container":"com.example.b"}
    {"type":"refusal","time":104,"path":"\(group)/secret","class":"complete","operation":"openExisting","state":"LOCKED","count":3,"last":105,"container":"group.example"}
    {"type":"missed","time":106,"path":"\(a)/Library/Caches/c","purgedBytes":400,"secondsSincePurge":4}
    {"type":"recreated","time":107,"path":"\(a)/Library/Caches/c","purgedBytes":400,"secondsSincePurge":5}
    {"type":"missed","time":108,"path":"\(b)/Library/Caches/d","purgedBytes":300,"secondsSincePurge":5}
    {"type":"usage","time":110,"used":3500,"capacity":4000,"caches":900,"tmp":0,"purges":4,"bytesPurged":2300,"noSpace":0,"state":"UNLOCKED","reason":"unmount"}
    {"type":"containerUsage","time":110,"container":"com.example.a","kind":"app","used":400,"caches":400,"tmp":0,"reason":"unmount"}
    {"type":"containerUsage","time":110,"container":"com.example.b","kind":"app","used":2700,"caches":200,"tmp":0,"reason":"unmount"}
    {"type":"containerUsage","time":110,"container":"group.example","kind":"group","used":400,"caches":400,"tmp":0,"reason":"unmount"}
    """

  static let summary = ReportSummary(EventLogParser.parse(Array(log.utf8)).events)

  @Test("each container's purges, their payers, its usage, refusals and purge cost")
  func containers() throws {
    let byID = Dictionary(uniqueKeysWithValues: Self.summary.containers.map { ($0.id, $0) })
    #expect(byID.keys.sorted() == ["com.example.a", "com.example.b", "group.example"])
    let a = try #require(byID["com.example.a"])
    #expect(a.kind == "app" && a.filesPurged == 2 && a.bytesPurged == 1400)
    #expect(a.bytesForOwnWrites == 400 && a.bytesForOthers == 1000 && a.bytesOthersPaid == 0)
    #expect(a.peakUsed == 1500 && a.lastUsed == 400)
    #expect(a.purgeCost == 1, "a miss and its re-creation are one")
    let b = try #require(byID["com.example.b"])
    #expect(b.bytesPurged == 300 && b.bytesForOthers == 0 && b.bytesOthersPaid == 1600)
    #expect(b.purgeCost == 1)
    let group = try #require(byID["group.example"])
    #expect(group.kind == "group" && group.bytesForOthers == 600 && group.refusals == 3)
    #expect(
      Self.summary.paidFor == [
        PaidFor(cache: "com.example.a", writer: "com.example.a").with(files: 1, bytes: 400),
        PaidFor(cache: "com.example.a", writer: "com.example.b").with(files: 1, bytes: 1000),
        PaidFor(cache: "group.example", writer: "com.example.b").with(files: 1, bytes: 600),
      ], "every pair, a's own writes too; an explicit purge is nobody's bill")
    #expect(Self.summary.purgeCost == 2 && Self.summary.purges == 4, "the device's totals are unchanged")
  }

  @Test("the summary's lines and the page name every container, and who paid for whom")
  func rowsAndPage() throws {
    let rows = Self.summary.rows
    let a = try #require(rows.first { $0.key == "container.com.example.a" })
    #expect(a.text.contains("used 400 B at the end (peak 1.5 KiB)"), "\(a.text)")
    #expect(a.text.contains("for others'"), "\(a.text)")
    #expect(rows.contains { $0.key == "paid.com.example.a.com.example.b" && $0.value == 1000 })
    let page = ReportPage.html(EventLogParser.parse(Array(Self.log.utf8)), source: "device")
    let outline = try #require(PageOutline.parse(page), "well-formed")
    let paid = outline.elements.filter { $0.name == "td" && $0.attributes["data-cache"] != nil }.map {
      ($0.attributes["data-cache"]!, $0.attributes["data-writer"] ?? "", $0.attributes["data-bytes"] ?? "")
    }
    #expect(paid.contains { $0 == ("com.example.a", "com.example.b", "1000") })
    #expect(paid.contains { $0 == ("com.example.a", "com.example.a", "400") }, "its own writes too")
    #expect(paid.contains { $0 == ("group.example", "com.example.b", "600") })
    #expect(outline.ids["containers"] == "svg" && outline.ids["paid-for"] == "table")
    let plain = ReportPage.html(EventLogParser.parse(Array(ReportFixtures.log.utf8)), source: "plain")
    #expect(!plain.contains("paid-for") && !plain.contains("Container "), "a plain mount's page is as before")
  }

  @Test("an experiment's rows give each container's medians and who paid for whom")
  func experiment() {
    let runs = [1.0, 2.0, 3.0].map { scale -> ExperimentRun in
      var summary = Self.summary
      summary.containers = summary.containers.map { container in
        var copy = container
        copy.bytesPurged = Int64(Double(container.bytesPurged) * scale)
        return copy
      }
      var run = ExperimentRun(capacity: 1 << 20, run: Int(scale), exitStatus: 0, seconds: 1, summary: summary)
      run.appStatuses = [("com.example.a", 0), ("com.example.b", scale == 3 ? 1 : 0)]
      return run
    }
    let row = ExperimentRow.rows(runs)[0]
    let a = row.containers.first { $0.id == "com.example.a" }
    #expect(a?.bytesPurged == 2800 && a?.bytesForOthers == 1000 && a?.exitStatuses == "0")
    #expect(row.containers.first { $0.id == "com.example.b" }?.exitStatuses == "0/1")
    #expect(row.containers.first { $0.id == "group.example" }?.exitStatuses == "")
    #expect(row.paidFor.map(\.bytes) == [400, 1000, 600])
    let text = ExperimentTable.containersText([row])
    #expect(text.contains("group.example") && text.contains("paid for others"), "\(text)")
    let page = ExperimentPage.html([row], command: ["com.example.a=true"])
    #expect(page.contains("id=\"paid-for\"") && page.contains("data-container=\"com.example.b\""))
  }
}

extension PaidFor {
  /// The entry with its counts.
  func with(files: Int, bytes: Int64) -> PaidFor {
    var copy = self
    copy.files = files
    copy.bytes = bytes
    return copy
  }
}
