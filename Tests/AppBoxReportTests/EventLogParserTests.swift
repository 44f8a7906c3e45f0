import AppBoxEvents
import SandboxPolicy
import Testing

@testable import AppBoxReport

@Suite("EventLogParser")
struct EventLogParserTests {
  @Test func readsEveryType() throws {
    let parsed = EventLogParser.parse(ReportFixtures.log)
    #expect(parsed.malformedLines == 0 && parsed.skippedLines == 0)
    #expect(parsed.events.count == 17)
    guard case .usage(let first) = parsed.events[0] else {
      Issue.record("first: \(parsed.events[0])")
      return
    }
    #expect(
      first.sample.used == 8192 && first.sample.capacity == 4_194_304 && first.state == .unlocked
        && first.reason == .mount)
    #expect(
      parsed.events.contains(.capacity(CapacityEvent(time: 1004, from: 4_194_304, to: 2_097_152, reason: .resize))))
    #expect(parsed.events.contains(.state(DeviceStateEvent(time: 1005, from: .unlocked, to: .grace))))
    #expect(
      parsed.events.contains(
        .refusal(
          ProtectionEvent(
            time: 1006.5, path: "Documents/secret", protectionClass: .complete, operation: .openExisting,
            state: .locked))))
    #expect(
      parsed.events.contains(
        .purgeCost(
          PurgeCostEvent(
            kind: .recreated, time: 1003.1, path: Array("Library/Caches/a".utf8), purgedBytes: 1_048_576,
            secondsSincePurge: 1))))
  }

  @Test("bad lines are counted and skipped, unknown types counted by type, a cut last line is malformed")
  func badLines() {
    let text = """
      not json
      {"type":"purge","time":1}
      {"type":"future","time":3,"x":1}
      []

      {"time":2}
      {"type":"state","time":"noon","from":"UNLOCKED","to":"LOCKED"}
      {"type":"usage","time":5,"used":1,"capacity":2,"caches":0,"tmp":0,"purges":0,"bytesPurged":0,"noSpace":0,"state":"UNLOCKED","reason":"mount"}
      {"type":"purge","time":6,"path":"tmp/a","bytes":1,"dom
      """
    let parsed = EventLogParser.parse(text)
    #expect(parsed.events.count == 1)
    #expect(parsed.skippedTypes == ["future": 1])
    #expect(parsed.malformedLines == 6)
    #expect(parsed.notes.contains("1 line of unknown types skipped (future 1)"))
    #expect(parsed.notes.contains("6 malformed lines skipped"))
  }

  @Test("events out of time order are sorted, ties keep the log's order")
  func order() {
    let text = """
      {"type":"state","time":5,"from":"UNLOCKED","to":"GRACE"}
      {"type":"state","time":1,"from":"BFU","to":"UNLOCKED"}
      {"type":"state","time":5,"from":"GRACE","to":"LOCKED"}
      """
    #expect(EventLogParser.parse(text).events.map(\.time) == [1, 5, 5])
    guard case .state(let tie) = EventLogParser.parse(text).events[1] else { return }
    #expect(tie.from == .unlocked)
  }

  @Test("the daemon's own lines after resize --capacity 9223372036854775807 read back, and the page renders")
  func largestCapacity() throws {
    let text = """
      {"type":"usage","time":1000.0,"used":8192,"capacity":4194304,"caches":0,"tmp":0,"purges":0,"bytesPurged":0,"noSpace":0,"state":"UNLOCKED","reason":"mount"}
      {"type":"capacity","time":1001.0,"from":4194304,"to":9223372036854775807,"reason":"resize"}
      {"type":"usage","time":1001.0,"used":8192,"capacity":9223372036854775807,"caches":0,"tmp":0,"purges":0,"bytesPurged":0,"noSpace":0,"state":"UNLOCKED","reason":"capacity"}
      """
    let parsed = EventLogParser.parse(text)
    #expect(parsed.malformedLines == 0 && parsed.events.count == 3)
    let summary = ReportSummary(parsed.events)
    #expect(summary.lastCapacity == .max)
    #expect(summary.rows.first { $0.key == "capacity" }?.text.hasPrefix("8 EiB") == true)
    let page = ReportPage.html(parsed, source: "m")
    #expect(page.contains("data-value=\"9223372036854775808\"") || page.contains("data-value=\"9223372036854775807\""))
  }

  @Test(
    "numbers no clock or counter reaches are refused as malformed, never crash the report",
    arguments: [
      #"{"type":"state","time":1e300,"from":"UNLOCKED","to":"LOCKED"}"#,
      #"{"type":"state","time":-1e308,"from":"UNLOCKED","to":"LOCKED"}"#,
      #"{"type":"state","time":1e308,"from":"UNLOCKED","to":"LOCKED"}"#,
      #"{"type":"capacity","time":1,"from":1e300,"to":2,"reason":"resize"}"#,
      #"{"type":"purge","time":1,"path":"tmp/a","bytes":1e300,"domain":"tmp","reason":"age","lastUse":0}"#,
      #"{"type":"missed","time":1,"path":"tmp/a","purgedBytes":1,"secondsSincePurge":1e300}"#,
    ])
  func hostileNumbers(_ line: String) {
    let text = #"{"type":"state","time":1000,"from":"UNLOCKED","to":"GRACE"}"# + "\n" + line
    let parsed = EventLogParser.parse(text)
    #expect(parsed.malformedLines == 1 && parsed.events.count == 1)
    _ = ReportSummary(parsed.events).text
    _ = ReportPage.html(parsed, source: "m")
  }

  @Test("a log of a newer format version says so")
  func newerVersion() {
    let parsed = EventLogParser.parse(#"{"type":"log","version":9,"mount":"x"}"#)
    #expect(parsed.newerVersion == 9)
  }

  @Test("coalesced refusals count all they stand for; a rotated log says what it dropped")
  func counts() {
    let text = """
      {"type":"log","version":1,"mount":"m","time":1,"segment":2,"eventsBefore":40}
      {"type":"refusal","time":2,"path":"Documents/a","class":"complete","operation":"openExisting","state":"LOCKED"}
      {"type":"refusal","time":2.1,"path":"Documents/a","class":"complete","operation":"openExisting","state":"LOCKED","count":49999,"last":3}
      """
    let parsed = EventLogParser.parse(text)
    #expect(ReportSummary(parsed.events).refusals == 50_000)
    #expect(ReportTimeline(parsed.events).refusals.map(\.value).reduce(0, +) == 50_000)
    #expect(parsed.droppedEvents == 40 && parsed.notes.contains { $0.hasPrefix("40 earlier events") })
  }

  @Test("the whole report over hostile but well-formed values: extreme sums, negative counts, time's ends")
  func extremeValues() {
    var lines: [String] = []
    for (index, time) in [-1e12, 0, 1e12, Double.leastNonzeroMagnitude, 1e12].enumerated() {
      lines.append(
        #"{"type":"usage","time":\#(time),"used":9223372036854775807,"capacity":-9223372036854775808,"caches":0,"tmp":0,"purges":-1,"bytesPurged":9223372036854775807,"noSpace":\#(index % 2 == 0 ? "9223372036854775807" : "-9223372036854775808"),"state":"LOCKED","reason":"interval"}"#
      )
      lines.append(
        #"{"type":"purge","time":\#(time),"path":"tmp/a","bytes":9223372036854775807,"domain":"tmp","reason":"age","lastUse":-1e12}"#
      )
      lines.append(
        #"{"type":"recreated","time":\#(time),"path":"tmp/a","purgedBytes":9223372036854775807,"secondsSincePurge":1e12}"#
      )
      lines.append(
        #"{"type":"refusal","time":\#(time),"path":"a","class":"complete","operation":"openExisting","state":"LOCKED","count":9223372036854775807,"last":1e12}"#
      )
      lines.append(
        #"{"type":"capacity","time":\#(time),"from":-9223372036854775808,"to":9223372036854775807,"reason":"schedule"}"#
      )
    }
    let parsed = EventLogParser.parse(lines.joined(separator: "\n"))
    #expect(parsed.malformedLines == 0 && parsed.events.count == lines.count)
    let summary = ReportSummary(parsed.events)
    #expect(summary.bytesPurged == .max && summary.refusals == .max)
    #expect(!summary.text.isEmpty)
    #expect(!ReportPage.html(parsed, source: "m").isEmpty)
  }

  @Test("20,000 hostile lines through the whole report: no crash")
  func fuzz() {
    var text: [UInt8] = []
    for line in ReportFuzz.hostileLines(count: 20_000) { text += line + [0x0A] }
    let parsed = EventLogParser.parse(text)
    #expect(parsed.events.count > 1000 && parsed.malformedLines > 1000)
    #expect(!ReportSummary(parsed.events).text.isEmpty)
    #expect(!ReportPage.html(parsed, source: "fuzz").isEmpty)
  }
}
