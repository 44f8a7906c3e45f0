import Testing

@testable import AppBoxReport

@Suite("EventLogParser")
struct EventLogParserTests {
  @Test func readsEveryType() {
    let parsed = EventLogParser.parse(ReportFixtures.log)
    #expect(parsed.malformedLines == 0 && parsed.otherLines == 0)
    #expect(parsed.events.count == 17)
    guard case .usage(let first) = parsed.events[0] else {
      Issue.record("first: \(parsed.events[0])")
      return
    }
    #expect(first.used == 8192 && first.capacity == 4_194_304 && first.state == "UNLOCKED" && first.reason == "mount")
    #expect(parsed.events.contains(.capacity(time: 1004, from: 4_194_304, to: 2_097_152, reason: "resize")))
    #expect(parsed.events.contains(.state(time: 1005, from: "UNLOCKED", to: "GRACE")))
    #expect(
      parsed.events.contains(
        .refusal(
          time: 1006.5, path: "Documents/secret", protectionClass: "complete", operation: "openExisting",
          state: "LOCKED")))
    #expect(
      parsed.events.contains(
        .cost(
          .init(recreated: true, time: 1003.1, path: "Library/Caches/a", purgedBytes: 1_048_576, secondsSincePurge: 1)))
    )
  }

  @Test("bad lines are counted and skipped, unknown types set aside, a cut last line is malformed")
  func badLines() {
    let text = """
      not json
      {"type":"purge","time":1}
      {"type":"future","time":3,"x":1}
      []

      {"time":2}
      {"type":"state","time":"noon","from":"A","to":"B"}
      {"type":"usage","time":5,"used":1,"capacity":2}
      {"type":"purge","time":6,"path":"tmp/a","bytes":1,"dom
      """
    let parsed = EventLogParser.parse(text)
    #expect(parsed.events.count == 1)
    #expect(parsed.otherLines == 1)
    #expect(parsed.malformedLines == 6)
  }

  @Test("events out of time order are sorted, ties keep the log's order")
  func order() {
    let text = """
      {"type":"state","time":5,"from":"A","to":"B"}
      {"type":"state","time":1,"from":"C","to":"D"}
      {"type":"state","time":5,"from":"B","to":"E"}
      """
    #expect(
      EventLogParser.parse(text).events == [
        .state(time: 1, from: "C", to: "D"), .state(time: 5, from: "A", to: "B"), .state(time: 5, from: "B", to: "E"),
      ])
  }
}
