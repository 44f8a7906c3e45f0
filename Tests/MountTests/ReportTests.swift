import Foundation
import SandboxPolicy
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// What an event log says, added up here from the JSON (not through AppBoxReport), so a
/// wrong aggregation in the product cannot make its own test pass.
struct EventTotals {
  var purges = 0
  var bytesPurged: Int64 = 0
  var recreated = 0
  var recreatedBytes: Int64 = 0
  var missed = 0
  /// Purged names paid for, each once: re-created, or missed and never re-created.
  var purgeCost = 0
  var refusals = 0
  var noSpace = 0
  var usageSamples = 0

  init(_ events: [[String: Any]]) {
    var missedPaths: [String] = []
    for event in events {
      let number = { (key: String) in (event[key] as? NSNumber)?.int64Value ?? 0 }
      switch event["type"] as? String {
      case "purge":
        purges += 1
        bytesPurged += number("bytes")
      case "recreated":
        recreated += 1
        recreatedBytes += number("purgedBytes")
        if let index = missedPaths.firstIndex(of: event["path"] as? String ?? "") { missedPaths.remove(at: index) }
      case "missed":
        missed += 1
        missedPaths.append(event["path"] as? String ?? "")
      case "refusal": refusals += Int(number("count") == 0 ? 1 : number("count"))  // coalesced: its count
      case "usage":
        usageSamples += 1
        noSpace = max(noSpace, Int(number("noSpace")))
      default: break
      }
    }
    purgeCost = recreated + missedPaths.count
  }

  /// The events of a JSON Lines text.
  static func events(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap {
      (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
    }
  }
}

/// `appbox report`, usage samples, and `appbox experiment` on real mounts; the pages open
/// in headless Chromium and parse as XML.
@Suite("Reports and experiments", .needsFUSE, .timeLimit(.minutes(10)))
struct ReportTests {
  let mib = Quota.mebibyte

  @Test(
    "appbox report of a live mount: the summary printed, the page's table and its charts agree with the events; the page renders in chromium and parses as XML",
    .needsBrowser)
  func liveReport() throws {
    let fixture = try MountFixture(arguments: ["--capacity", "8M", "--usage-interval", "100ms", "--grace", "0"])
    for index in 0..<3 {
      try Quota.writeFile(fixture.path("Library/Caches/c\(index)"), count: 2 * mib, seed: UInt64(index))
    }
    try Quota.writeFile(fixture.path("tmp/scratch"), count: mib)
    try Quota.writeFile(fixture.path("Documents/d1"), count: 3 * mib)  // pressure: tmp, then Caches
    #expect(Quota.waitForReleases(fixture))
    let purged = try Quota.purgedPaths(fixture.mountpoint).filter { $0.hasPrefix("Library/Caches/") }
    let refetched = try #require(purged.first, "nothing purged from Caches")
    // The app fetches a purged cache entry again: a missed lookup, then a re-creation.
    try Command.shell(
      "test -e \"$0\" || head -c 100000 /dev/zero > \"$0\"".replacingOccurrences(
        of: "$0", with: fixture.path(refetched)))
    #expect(try Experiment.resize(fixture.mountpoint, "6M").status == 0)
    // A class-A file, refused while locked.
    try Quota.writeFile(fixture.path("Documents/secret"), count: 10)
    #expect(
      try Command.run(Command.appbox, ["protect", fixture.path("Documents/secret"), "--class", "complete"]).status == 0)
    #expect(Experiment.writeUntilFull(fixture.path("Documents/fill"), count: 16 * mib).error == ENOSPC)
    #expect(try Command.run(Command.appbox, ["lock", fixture.mountpoint]).status == 0)
    #expect(Quota.openError(fixture.path("Documents/secret")) == EPERM)
    #expect(try Command.run(Command.appbox, ["unlock", fixture.mountpoint]).status == 0)
    // The sampler saw the ENOSPC refusals (every 100 ms when they change).
    #expect(
      try Quota.poll {
        try Experiment.events(fixture.mountpoint, type: "usage").contains { Experiment.number($0, "noSpace") >= 1 }
      })
    _ = try Experiment.events(fixture.mountpoint, type: "refusal", atLeast: 1)

    let log = try Command.run(Command.appbox, ["events", fixture.mountpoint]).output
    let saved = fixture.root + "/events.jsonl"
    try log.write(toFile: saved, atomically: true, encoding: .utf8)
    let totals = EventTotals(EventTotals.events(log))
    #expect(totals.purges >= 2 && totals.recreated == 1 && totals.missed == 1 && totals.purgeCost == 1)
    #expect(totals.refusals >= 1 && totals.noSpace >= 1)

    let page = fixture.root + "/report.html"
    let live = try Command.run(Command.appbox, ["report", fixture.mountpoint, "--output", page])
    #expect(live.status == 0, "\(live.error)")
    let offline = try Command.run(Command.appbox, ["report", "--events", saved])
    #expect(offline.status == 0, "\(offline.error)")
    try fixture.unmount()

    // The terminal summary: the events' numbers, the same from the mount and from the file.
    let printed = live.output.replacingOccurrences(of: "report: \(page)\n", with: "")
    #expect(printed == offline.output)
    func line(_ label: String) -> String? {
      printed.split(separator: "\n").first { $0.hasPrefix(label) }.map {
        String($0.dropFirst(label.count)).trimmingCharacters(in: .whitespaces)
      }
    }
    #expect(line("Files purged") == "\(totals.purges)")
    #expect(line("Bytes purged") == ByteCount(totals.bytesPurged).formatted)
    #expect(line("Purged files created again") == "\(totals.recreated)")
    #expect(line("Purged names looked up and missed") == "\(totals.missed)")
    #expect(line("Data Protection refusals") == "\(totals.refusals)")
    #expect(line("ENOSPC refusals") == "\(totals.noSpace)")
    #expect(line("Purge cost (purged names paid for)")?.hasPrefix("\(totals.purgeCost)") == true, "\(printed)")

    // Without a browser: well-formed XML whose table holds the events' numbers.
    let xml = try Browser.xmlCells(of: page)
    #expect(xml.error == nil, "\(xml.error ?? "")")
    let expected: [String: Int64] = [
      "purges": Int64(totals.purges), "bytesPurged": totals.bytesPurged, "recreated": Int64(totals.recreated),
      "recreatedBytes": totals.recreatedBytes, "missed": Int64(totals.missed), "refusals": Int64(totals.refusals),
      "noSpace": Int64(totals.noSpace), "purgeCost": Int64(totals.purgeCost),
    ]
    for (key, value) in expected { #expect(xml.cells[key] == ["\(value)"], "\(key): \(xml.cells[key] ?? [])") }

    // In Chromium: every chart laid out with marks, the lines drawn, the same numbers.
    let layout = try Browser.layout(of: page, in: fixture.root)
    #expect(layout.scripts == 0)
    #expect(Set(layout.charts.map(\.id)) == ["timeline", "purges", "cost", "cost-bytes", "states"])
    for chart in layout.charts {
      #expect(chart.width > 300 && chart.height > 50, "\(chart.id): \(chart.width)×\(chart.height)")
      #expect(chart.visibleMarks > 0, "\(chart.id)")
    }
    for id in ["used-line", "capacity-line"] {
      let box = try #require(layout.boxes[id], "\(id)")
      #expect(box.width > 100, "\(id): \(box.width)×\(box.height)")
    }
    #expect((layout.boxes["used-line"]?.height ?? 0) > 10)  // usage rose and fell
    for (key, value) in expected { #expect(layout.cells[key] == ["\(value)"], "\(key)") }
  }

  /// The repository's root (for Examples/).
  static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

  @Test(
    "appbox experiment over 4 capacities with a deterministic cache workload: purge cost falls as capacity grows; the table, the page and the events agree",
    .needsBrowser)
  func sweep() throws {
    let scratch = try SandboxDirectories(prefix: "appbox-experiment")
    let eventsDirectory = scratch.root + "/events"
    try FileManager.default.createDirectory(atPath: eventsDirectory, withIntermediateDirectories: false)
    let page = scratch.root + "/experiment.html"
    let capacities = ["2M", "4M", "8M", "16M"]
    let result = try Command.run(
      Command.appbox,
      [
        "experiment", "--capacities", capacities.joined(separator: ","), "--runs", "2", "--output", page,
        "--events-dir", eventsDirectory, "--", "python3", Self.repository + "/Examples/cache-workload.py",
      ])
    try #require(result.status == 0, "\(result.error)")
    #expect(!result.error.contains("[1/8]"))  // progress only on a terminal

    // The table: a header and one line per capacity.
    let lines = result.output.split(separator: "\n").filter { !$0.hasPrefix("cache-workload:") }
    let header = try #require(lines.first)
    #expect(header.hasPrefix("capacity") && header.contains("purge cost"))
    let xml = try Browser.xmlCells(of: page)
    #expect(xml.error == nil, "\(xml.error ?? "")")
    var costs: [Int] = []
    for (index, capacity) in capacities.enumerated() {
      let bytes = try ByteCount.parse(capacity).bytes
      let name = ByteCount(bytes).formatted.replacingOccurrences(of: " ", with: "")
      // Each run's own log, added up here.
      let runs = try (1...2).map { run in
        EventTotals(
          EventTotals.events(try String(contentsOfFile: "\(eventsDirectory)/\(name)-\(run).jsonl", encoding: .utf8)))
      }
      // A deterministic workload: both runs pay the same.
      #expect(runs[0].purgeCost == runs[1].purgeCost && runs[0].bytesPurged == runs[1].bytesPurged, "\(capacity)")
      let totals = runs[0]
      costs.append(totals.purgeCost)
      let cells = lines[index + 1].split(separator: " ", omittingEmptySubsequences: true).map(String.init)
      // capacity (2 words), runs, purged (2), purge cost, re-created (2), ENOSPC, exit, time (2)
      #expect(cells.count == 12, "\(cells)")
      guard cells.count == 12 else { continue }
      #expect(cells[0] + " " + cells[1] == ByteCount(bytes).formatted)
      #expect(cells[2] == "2")
      #expect(cells[3] + " " + cells[4] == ByteCount(totals.bytesPurged).formatted)
      #expect(cells[5] == "\(totals.purgeCost)")
      #expect(cells[6] + " " + cells[7] == ByteCount(totals.recreatedBytes).formatted)
      #expect(cells[8] == "\(totals.noSpace)")
      #expect(cells[9] == "0")
      #expect(xml.cells["purgeCost"]?[index] == "\(totals.purgeCost)")
      #expect(xml.cells["bytesPurged"]?[index] == "\(totals.bytesPurged)")
      #expect(xml.cells["capacity"]?[index] == "\(bytes)")
    }
    #expect(costs.first! > 0 && costs.last! == 0, "\(costs)")
    #expect(zip(costs, costs.dropFirst()).allSatisfy { $0 > $1 }, "purge cost should fall as capacity grows: \(costs)")

    let layout = try Browser.layout(of: page, in: scratch.root)
    let curve = try #require(layout.charts.first { $0.id == "curve" })
    #expect(curve.width > 300 && curve.height > 100)
    #expect(curve.visibleMarks >= capacities.count + 1)  // a dot per capacity and the line
    #expect((layout.boxes["cost-curve"]?.height ?? 0) > 50)
    #expect(layout.cells["purgeCost"] == costs.map { "\($0)" })
  }

  @Test(
    "bad input to report and experiment exits with its code and says what to do; nothing runs",
    arguments: [
      (["report"], 64, "MOUNTPOINT or --events"),
      (["report", "/", "--events", "/dev/null"], 64, "one of them"),
      (["report", "--events", "/nonexistent/log"], 66, "cannot read"),
      (["report", "--bogus"], 64, "unknown option"),
      (["report", "/tmp"], 75, "not an AppBox mount"),
      (["experiment", "--capacities", "4M", "--", "true"], 0, "capacity"),
      (["experiment", "--", "true"], 64, "--capacities is missing"),
      (["experiment", "--capacities", "4M", "true"], 64, "missing --"),
      (["experiment", "--capacities", "4M", "--"], 64, "missing PROGRAM"),
      (["experiment", "--capacities", "4M,lots", "--", "true"], 65, "lots"),
      (["experiment", "--capacities", "4M,4M", "--", "true"], 65, "twice"),
      (["experiment", "--capacities", "512K", "--", "true"], 65, "minimum"),
      (["experiment", "--capacities", "4M", "--runs", "0", "--", "true"], 65, "--runs"),
      (["experiment", "--capacities", "4M", "--capacity", "4M", "--", "true"], 64, "does not apply"),
      (["experiment", "--capacities", "4M", "--template", "/nonexistent", "--", "true"], 66, "not a directory"),
      (["experiment", "--capacities", "4M", "--grace", "soon", "--", "true"], 65, "--grace"),
    ] as [([String], Int32, String)])
  func badInput(_ arguments: [String], _ status: Int32, _ message: String) throws {
    let result = try Command.run(Command.appbox, arguments)
    #expect(result.status == status, "\(result.error)")
    #expect((result.error + result.output).contains(message), "\(result.error)\(result.output)")
  }

  @Test("experiment: each run gets a fresh copy of the template; progress only on a terminal")
  func templateAndProgress() throws {
    let scratch = try SandboxDirectories(prefix: "appbox-experiment")
    let template = scratch.backing
    try FileManager.default.createDirectory(atPath: template + "/Library/Caches", withIntermediateDirectories: true)
    try "seed".write(toFile: template + "/Library/Caches/seed", atomically: true, encoding: .utf8)
    // The program finds the template's file, then removes it: the next run finds it again.
    let program = "test -f \"$XDG_CACHE_HOME/seed\" && rm \"$XDG_CACHE_HOME/seed\""
    let plain = try Command.run(
      Command.appbox,
      ["experiment", "--capacities", "4M,8M", "--runs", "2", "--template", template, "--", "sh", "-c", program])
    #expect(plain.status == 0, "\(plain.error)")
    let rows = plain.output.split(separator: "\n").dropFirst()
    // capacity (2 words), runs, purged (2), purge cost, re-created (2), ENOSPC, exit: every run found it.
    let exits = rows.map { $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst(9).first }
    #expect(exits == ["0", "0"], "\(plain.output)")
    #expect(FileManager.default.fileExists(atPath: template + "/Library/Caches/seed"))
    #expect(!plain.error.contains("[1/4]"))
    // Under a terminal (script(1) gives it one), progress lines go to it.
    let command = [Command.appbox, "experiment", "--capacities", "4M", "--", "true"].joined(separator: " ")
    let terminal = try Command.run("/usr/bin/script", ["-qec", command, "/dev/null"])
    #expect(terminal.status == 0, "\(terminal.error)")
    #expect(terminal.output.contains("[1/1] 4 MiB, run 1 of 1"), "\(terminal.output)")
  }

  @Test(
    "--purge-policy on a mount: largest takes the big file first, fifo ignores a recent use, lru honours it",
    arguments: [("largest", "big"), ("fifo", "old"), ("lru", "middle")])
  func purgePolicy(_ policy: String, _ firstVictim: String) throws {
    let fixture = try MountFixture(arguments: ["--capacity", "8M", "--purge-policy", policy])
    #expect(try Quota.status(fixture.mountpoint)["purgePolicy"] as? String == policy)
    // Created a second apart (LRU times are whole seconds): old, middle, big.
    try Quota.writeFile(fixture.path("Library/Caches/old"), count: mib)
    usleep(1_100_000)
    try Quota.writeFile(fixture.path("Library/Caches/middle"), count: mib)
    usleep(1_100_000)
    try Quota.writeFile(fixture.path("Library/Caches/big"), count: 2 * mib)
    usleep(1_100_000)
    try Quota.use(fixture.path("Library/Caches/old"))  // a use: the newest for LRU
    #expect(Quota.waitForReleases(fixture))
    try Quota.purge(fixture.mountpoint, ["--bytes", "4K"])
    #expect(try Quota.purgedPaths(fixture.mountpoint) == ["Library/Caches/\(firstVictim)"])
    try fixture.unmount()
  }

  @Test("experiment --purge-policies: a row per policy and capacity, each agreeing with its log")
  func policySweep() throws {
    let scratch = try SandboxDirectories(prefix: "appbox-experiment")
    let eventsDirectory = scratch.root + "/events"
    try FileManager.default.createDirectory(atPath: eventsDirectory, withIntermediateDirectories: false)
    let result = try Command.run(
      Command.appbox,
      [
        "experiment", "--capacities", "2M,8M", "--purge-policies", "lru,fifo,largest", "--events-dir", eventsDirectory,
        "--output", scratch.root + "/sweep.html", "--", "python3", Self.repository + "/Examples/cache-workload.py",
      ])
    try #require(result.status == 0, "\(result.error)")
    let lines = result.output.split(separator: "\n").filter {
      !$0.hasPrefix("cache-workload:") && !$0.hasPrefix("report:")
    }
    #expect(lines.first?.contains("policy") == true)
    #expect(lines.count == 7, "\(result.output)")
    for line in lines.dropFirst() {
      let cells = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
      guard cells.count == 13 else {
        Issue.record("\(cells)")
        continue
      }
      let name = cells[0] + cells[1]
      let totals = EventTotals(
        EventTotals.events(
          try String(contentsOfFile: "\(eventsDirectory)/\(name)-\(cells[2])-1.jsonl", encoding: .utf8)))
      #expect(cells[6] == "\(totals.purgeCost)", "\(line)")
      #expect(cells[4] + " " + cells[5] == ByteCount(totals.bytesPurged).formatted, "\(line)")
    }
    let xml = try Browser.xmlCells(of: scratch.root + "/sweep.html")
    #expect(xml.error == nil && xml.cells["policy"] == ["lru", "lru", "fifo", "fifo", "largest", "largest"])
  }
}
