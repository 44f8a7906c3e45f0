import AppBoxEvents
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The schema's reader (MountTests has an `EventLogReader` of its own).
typealias LogReader = AppBoxEvents.EventLogReader

/// The event log on real mounts (docs/reference.md, "Events"): bounded under a refusal
/// storm, one log per mount, the daemon's own extreme values readable, usage sampled at
/// purges.
@Suite("Event log on a mount", .needsFUSE, .timeLimit(.minutes(10)))
struct EventLogMountTests {
  /// `appbox events` of a mount (or `arguments` before it), parsed with the schema.
  static func read(_ arguments: [String]) throws -> LogReader {
    let result = try Command.run(Command.appbox, ["events"] + arguments)
    try #require(result.status == 0, "appbox events \(arguments): \(result.status) \(result.error)")
    var reader = LogReader()
    reader.read(Array(result.output.utf8))
    return reader
  }

  static func refusals(_ reader: LogReader) -> Int {
    reader.events.reduce(0) { total, event in
      if case .refusal(let refusal) = event { total + refusal.count } else { total }
    }
  }

  @Test("50,000 refused opens of a class-A file by a program: the log stays small, every count adds up")
  func refusalStorm() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    try Data("secret".utf8).write(to: URL(fileURLWithPath: fixture.path("Documents/secret")))
    #expect(Sys2.setxattr(fixture.path("Documents/secret"), ProtectionAttribute.protection, "complete") == 0)
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    let storm = try Command.run(
      "/usr/bin/python3",
      [
        "-c",
        """
        import os, sys
        refused = 0
        for _ in range(50000):
            try:
                os.close(os.open(sys.argv[1], os.O_RDONLY))
            except PermissionError:
                refused += 1
        print(refused)
        """,
        fixture.path("Documents/secret"),
      ])
    #expect(storm.output.trimmingCharacters(in: .whitespacesAndNewlines) == "50000", "\(storm.error)")
    let status = try fixture.status()
    #expect((status["refusals"] as? [String: Any])?["total"] as? Int == 50_000)
    // The last window's refusals are written when it closes (a second).
    var reader = LogReader()
    let counted = try Quota.poll(seconds: 20) {
      reader = try Self.read([fixture.mountpoint])
      return Self.refusals(reader) == 50_000
    }
    #expect(counted, "the log's refusals add up to \(Self.refusals(reader))")
    let size = try Command.run(Command.appbox, ["events", fixture.mountpoint]).output.utf8.count
    #expect(size < 64 << 10, "the log holds \(size) bytes (one line per refusal: about 6.6 MB)")
    let report = try Command.run(Command.appbox, ["report", fixture.mountpoint])
    #expect(
      report.output.range(of: #"Data Protection refusals\s+50000"#, options: .regularExpression) != nil,
      "\(report.output)")
    let logStatus = try #require(status["eventLog"] as? [String: Any])
    #expect((logStatus["coalescedRefusals"] as? Int ?? 0) > 40_000, "\(logStatus)")
    try fixture.unmount()
  }

  @Test("each mount has its own log: a mount over a new backing reports only its own events; earlier logs stay listed")
  func logPerMount() throws {
    let first = try BackingMount()
    try first.mount(["--unlocked", "--grace", "0"])
    for verb in ["lock", "unlock"] {
      #expect(try Command.run(Command.appbox, [verb, first.mountpoint]).status == 0)
    }
    #expect(try Experiment.events(first.mountpoint, type: "state", atLeast: 2).count == 2)
    try first.unmount()

    // The same mountpoint, over a new backing directory.
    let backing = first.root + "/backing2"
    try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: false)
    let mounted = try Command.run(Command.appbox, ["mount", "--backing", backing, first.mountpoint])
    try #require(mounted.status == 0, "\(mounted.error)")
    // The test unmounts; this is a fallback when it stops early.
    defer { _ = try? Command.run(Command.appbox, ["unmount", first.mountpoint]) }
    let report = try Command.run(Command.appbox, ["report", first.mountpoint])
    #expect(report.output.range(of: #"Lock state changes\s+0"#, options: .regularExpression) != nil, "\(report.output)")
    #expect(try Experiment.events(first.mountpoint, type: "state").isEmpty, "the earlier mount's events")

    let status = try Command.run(Command.appbox, ["status", "--json", first.mountpoint])
    let object = try #require(
      (try JSONSerialization.jsonObject(with: Data(status.output.utf8))) as? [String: Any], "\(status.output)")
    let secondID = try #require((object["eventLog"] as? [String: Any])?["id"] as? String)
    #expect(
      try Command.run(Command.appbox, ["status", first.mountpoint]).output.contains("event log:   mount \(secondID)"))
    let list = try Command.run(Command.appbox, ["events", "--list", first.mountpoint])
    let listed = list.output.split(separator: "\n").map { $0.split(separator: " ").first.map(String.init) ?? "" }
    #expect(listed.count == 2 && listed.first == secondID, "\(list.output)")
    let firstID = try #require(listed.last)
    #expect(firstID != secondID)
    #expect(list.output.split(separator: "\n").first?.hasSuffix("current") == true)

    let current = try Command.run(Command.appbox, ["events", first.mountpoint])
    var reader = LogReader()
    reader.read(Array(current.output.utf8))
    #expect(reader.mounts == [secondID], "appbox events (\(current.status)): \(current.output)\(current.error)")
    let earlier = try Self.read(["--mount-id", firstID, first.mountpoint])
    #expect(earlier.mounts == [firstID] && earlier.events.filter { $0.typeName == "state" }.count == 2)
    let earlierReport = try Command.run(Command.appbox, ["report", "--mount-id", firstID, first.mountpoint])
    #expect(earlierReport.output.range(of: #"Lock state changes\s+2"#, options: .regularExpression) != nil)

    #expect(try Command.run(Command.appbox, ["unmount", first.mountpoint]).status == 0)
    // Unmounted: the logs are still there to list and read; without an id, a hint.
    #expect(try Command.run(Command.appbox, ["events", "--list", first.mountpoint]).output.contains(firstID))
    #expect(try Self.read(["--mount-id", secondID, first.mountpoint]).mounts == [secondID])
    let gone = try Command.run(Command.appbox, ["events", first.mountpoint])
    #expect(gone.status == 75 && gone.error.contains("appbox events --list"), "\(gone.error)")
    let unknown = try Command.run(Command.appbox, ["events", "--mount-id", "19700101-000000-0000", first.mountpoint])
    #expect(unknown.status == 66, "\(unknown.error)")
  }

  @Test(
    "a log rotated many times: events --follow prints every change once, in order; events and report read both segments"
  )
  func rotation() throws {
    var environment = ProcessInfo.processInfo.environment
    environment["APPBOX_EVENT_SEGMENT_BYTES"] = "2048"
    let mount = try BackingMount()
    let mounted = try Command.run(
      Command.appbox, ["mount", "--backing", mount.backing, "--unlocked", "--grace", "0", mount.mountpoint],
      environment: environment)
    try #require(mounted.status == 0, "\(mounted.error)")
    // The test unmounts; this is a fallback when it stops early.
    defer { _ = try? Command.run(Command.appbox, ["unmount", mount.mountpoint]) }
    let output = mount.root + "/follow.jsonl"
    let follower = Process()
    follower.executableURL = URL(fileURLWithPath: Command.appbox)
    follower.arguments = ["events", "--follow", mount.mountpoint]
    try #require(FileManager.default.createFile(atPath: output, contents: nil))
    follower.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
    try follower.run()
    let changes = 120
    for index in 0..<changes {
      #expect(try Command.run(Command.appbox, [index % 2 == 0 ? "lock" : "unlock", mount.mountpoint]).status == 0)
    }
    let status = try Command.run(Command.appbox, ["status", "--json", mount.mountpoint])
    let object = try #require((try JSONSerialization.jsonObject(with: Data(status.output.utf8))) as? [String: Any])
    let log = try #require(object["eventLog"] as? [String: Any])
    #expect((log["segment"] as? Int ?? 0) > 2, "\(log)")
    #expect((log["droppedEvents"] as? Int ?? 0) > 0, "\(log)")
    // appbox events: the two segments kept, and the events before them counted.
    let kept = try Self.read([mount.mountpoint])
    #expect(kept.headers.count == 2 && kept.malformedLines == 0)
    #expect(kept.droppedEvents > 0)
    let report = try Command.run(Command.appbox, ["report", mount.mountpoint])
    #expect(report.error.contains("earlier events no longer in the log"), "\(report.error)")
    // Mounted here by hand (for the environment), so unmounted by hand.
    #expect(try Command.run(Command.appbox, ["unmount", mount.mountpoint]).status == 0)
    let deadline = Date().addingTimeInterval(30)
    while follower.isRunning && Date() < deadline { usleep(20_000) }
    if follower.isRunning {
      follower.terminate()
      Issue.record("events --follow did not exit once the mount was gone")
    }
    follower.waitUntilExit()
    #expect(follower.terminationStatus == 0)
    // The follower saw every segment: every change once, in order.
    var followed = LogReader()
    followed.read(Array(try #require(FileManager.default.contents(atPath: output))))
    let states = followed.events.compactMap { event -> String? in
      if case .state(let change) = event { "\(change.from.name)→\(change.to.name)" } else { nil }
    }
    #expect(states.count == changes, "\(states.count) of \(changes)")
    #expect(states == (0..<changes).map { $0 % 2 == 0 ? "UNLOCKED→LOCKED" : "LOCKED→UNLOCKED" })
    #expect(followed.malformedLines == 0)
  }

  @Test("resize --capacity 9223372036854775807: the report reads every line the daemon wrote, and draws them")
  func largestCapacity() throws {
    let fixture = try MountFixture()
    #expect(try Experiment.resize(fixture.mountpoint, "9223372036854775807").status == 0)
    _ = try Experiment.events(fixture.mountpoint, type: "capacity", atLeast: 1)
    let page = fixture.root + "/report.html"
    let report = try Command.run(Command.appbox, ["report", fixture.mountpoint, "--output", page])
    #expect(report.status == 0, "\(report.error)")
    #expect(!report.error.contains("malformed"), "\(report.error)")
    #expect(
      report.output.range(of: #"Capacity at the end\s+8 EiB"#, options: .regularExpression) != nil, "\(report.output)")
    let saved = fixture.root + "/events.jsonl"
    try Command.run(Command.appbox, ["events", fixture.mountpoint]).output.write(
      toFile: saved, atomically: true, encoding: .utf8)
    let offline = try Command.run(Command.appbox, ["report", "--events", saved])
    #expect(offline.status == 0 && !offline.error.contains("malformed"), "\(offline.error)")
    try fixture.unmount()
  }

  @Test("a report of hostile numbers exits 0, counting them malformed")
  func hostileNumbers() throws {
    let directories = try SandboxDirectories(prefix: "appbox-report")
    let file = directories.root + "/events.jsonl"
    try """
    {"type":"state","time":1000,"from":"UNLOCKED","to":"LOCKED"}
    {"type":"state","time":1e300,"from":"LOCKED","to":"UNLOCKED"}
    {"type":"state","time":-1e308,"from":"LOCKED","to":"UNLOCKED"}
    {"type":"purge","time":1e308,"path":"tmp/a","bytes":1e300,"domain":"tmp","reason":"age","lastUse":0}
    {"type":"future","time":1}
    """.write(toFile: file, atomically: true, encoding: .utf8)
    let report = try Command.run(
      Command.appbox, ["report", "--events", file, "--output", directories.root + "/r.html"])
    #expect(report.status == 0, "\(report.status) \(report.error)")
    #expect(report.error.contains("3 malformed lines skipped"), "\(report.error)")
    #expect(report.error.contains("1 line of unknown types skipped (future 1)"), "\(report.error)")
  }

  @Test("with the default interval, a usage sample follows each purge: the usage line drops with it")
  func usageAtPurges() throws {
    let fixture = try MountFixture(arguments: ["--capacity", "8M"])
    for index in 0..<12 {
      #expect(Experiment.writeUntilFull(fixture.path("Library/Caches/c\(index)"), count: 1 << 20).error == 0)
    }
    // Each run of purge lines is followed by a usage sample taken for the purge (the
    // purging thread records it right after the purge's events).
    var types: [String] = []
    var problems: [String] = []
    let sampled = try Quota.poll {
      let output = try Command.run(Command.appbox, ["events", fixture.mountpoint]).output
      // Every line the daemon wrote parses.
      let all = output.split(separator: "\n").compactMap {
        (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
      }
      types = all.map { $0["type"] as? String ?? "?" }
      let runEnds = types.indices.filter { types[$0] == "purge" && ($0 + 1 == types.count || types[$0 + 1] != "purge") }
      problems = runEnds.compactMap { end in
        guard end + 1 < all.count, all[end + 1]["type"] as? String == "usage",
          all[end + 1]["reason"] as? String == "purge"
        else { return "no purge sample after line \(end)" }
        return Experiment.number(all[end + 1], "used") <= Experiment.number(all[end + 1], "capacity")
          ? nil : "a sample above the capacity after line \(end)"
      }
      return !runEnds.isEmpty && problems.isEmpty
    }
    #expect(sampled, "\(problems); \(types)")
    try fixture.unmount()
  }
}
