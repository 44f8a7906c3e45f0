import AppBoxEvents
import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's event log, below the mount: coalesced refusals, rotation at its bound,
/// usage sampled at purges (docs/reference.md, "Events").
@Suite("Event log through the protocol")
struct EventLogTests {
  /// The log's lines read with the one schema: the current segment, after the previous
  /// one if the log was rotated.
  static func read(_ box: Sandbox) -> EventLogReader {
    box.fs.events.flush()
    var reader = EventLogReader()
    let previous = EventLogFormat.previousSegmentPath(of: box.eventsPath)
    for path in [previous, box.eventsPath] {
      if let text = TestFiles.text(of: path) { reader.read(Array(text.utf8)) }
    }
    return reader
  }

  static func size(_ path: String) -> Int { (try? Sys.lstatPath(path)).map { Int($0.st_size) } ?? 0 }  // absent: 0

  @Test("5,000 refused opens of one file: two lines whose counts add up, while the counter counts each")
  func refusalStorm() throws {
    let box = try Sandbox { $0.eventLogLimits.coalescingWindow = 60 }
    try box.makeFile("Documents/secret", bytes: 10)
    try box.setxattr("Documents/secret", "user.appbox.protection", "complete")
    #expect(box.fs.lock() == .locked)
    for _ in 0..<5000 {
      #expect(throws: Errno.notPermitted) { try box.open("Documents/secret") }
    }
    #expect(box.fs.protection.counters.withLock { $0.totalRefusals } == 5000)
    let reader = Self.read(box)
    let refusals = reader.events.compactMap { event -> ProtectionEvent? in
      if case .refusal(let refusal) = event { refusal } else { nil }
    }
    #expect(refusals.map(\.count) == [1, 4999])
    #expect(refusals.allSatisfy { $0.path == "Documents/secret" && $0.operation == .openExisting })
    #expect(refusals.last.map { $0.last! >= $0.time } == true)
    #expect(Self.size(box.eventsPath) < 4096, "the log stays small")
    #expect(box.fs.events.status.coalescedRefusals == 4999)
  }

  @Test("the log rotates at its bound: two segments at most, and what rotation dropped is counted")
  func rotation() throws {
    let box = try Sandbox { $0.eventLogLimits.segmentBytes = 4096 }
    let recorded = 1000
    for index in 0..<recorded {
      box.fs.events.record(.state(DeviceStateEvent(time: Double(index), from: .unlocked, to: .locked)))
    }
    let reader = Self.read(box)
    let previous = EventLogFormat.previousSegmentPath(of: box.eventsPath)
    // The mount's own usage sample is an event too.
    #expect(reader.events.count + reader.droppedEvents == recorded + 1)
    #expect(reader.droppedEvents > 0 && reader.malformedLines == 0)
    #expect(Self.size(box.eventsPath) <= 4096 && Self.size(previous) <= 4096 + 200)
    let status = box.fs.events.status
    #expect(status.segment == reader.headers.last?.segment && status.segment > 10)
    #expect(status.lostEvents == 0 && status.lastError == nil)
    // The previous segment ends with the mark that sends followers to the new one.
    let lastLine = try #require(TestFiles.text(of: previous)?.split(separator: "\n").last)
    #expect(AppBoxEvent.leadingType(Array(lastLine.utf8)) == "rotate")
    // Both segments start with a header naming the mount and their number.
    #expect(reader.headers.count == 2 && Set(reader.headers.map(\.mount)) == [box.fs.events.id])
    #expect(reader.headers[1].segment == reader.headers[0].segment + 1)
    // Nothing else of the log is left beside it.
    let directory = String(box.eventsPath[..<box.eventsPath.lastIndex(of: "/")!])
    #expect(
      TestFiles.entries(of: directory).filter { $0.contains("events") }.sorted() == ["events.1.jsonl", "events.jsonl"])
  }

  @Test("a usage sample follows each purge's events, so the usage line drops with the purge")
  func usageAtPurges() throws {
    let box = try Sandbox(capacity: 2 << 20) { $0.usageInterval = 0 }
    for index in 0..<12 { try box.makeFile("Library/Caches/c\(index)", bytes: 256 * 1024) }
    box.fs.events.flush()
    let lines = try #require(TestFiles.text(of: box.eventsPath)).split(separator: "\n").map(String.init)
    let types = lines.map { line -> String in
      AppBoxEvent.leadingType(Array(line.utf8)).map(String.init) ?? "?"
    }
    let purgeRuns = types.indices.filter { types[$0] == "purge" && ($0 + 1 == types.count || types[$0 + 1] != "purge") }
    #expect(purgeRuns.count >= 2, "\(types)")
    for end in purgeRuns {
      try #require(end + 1 < lines.count, "a purge is the last line: \(types)")
      let next = try AppBoxEvent.decode(Array(lines[end + 1].utf8))
      guard case .usage(let usage) = next else {
        Issue.record("after a purge: \(lines[end + 1])")
        continue
      }
      #expect(usage.reason == .purge && usage.sample.used <= usage.sample.capacity)
      #expect(usage.sample.purges > 0)
    }
  }
}
