import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// What a purge costs the app: purged names created again or looked up and missed, and
/// the Caches files' hits, as events and `appbox status` counters.
@Suite("Purge cost", .needsFUSE, .timeLimit(.minutes(10)))
struct PurgeCostTests {
  let mib = Quota.mebibyte

  /// The `purgeCost` object of `appbox status --json`.
  func cost(_ fixture: MountFixture) throws -> [String: Any] {
    try Quota.status(fixture.mountpoint)["purgeCost"] as? [String: Any] ?? [:]
  }

  /// A purge event's bytes for a path.
  func purgedBytes(_ fixture: MountFixture, _ path: String) throws -> Double? {
    try Quota.events(fixture.mountpoint).first { $0["path"] as? String == path }.map {
      Experiment.number($0, "bytes")
    }
  }

  @Test("a program that re-creates a purged cache file: a missed lookup, then a re-creation, with the purged bytes")
  func recreated() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    try Quota.writeFile(fixture.path("Library/Caches/img1"), count: mib, seed: 1)
    try Quota.writeFile(fixture.path("Library/Caches/img2"), count: mib / 2, seed: 2)
    try Quota.writeFile(fixture.path("tmp/scratch"), count: 4096, seed: 3)
    #expect(Quota.waitForReleases(fixture))
    #expect(try Experiment.events(fixture.mountpoint, type: "recreated").isEmpty)
    try Quota.purge(fixture.mountpoint, ["--domain", "caches", "--all"])
    let log = try Command.run(Command.appbox, ["events", fixture.mountpoint]).output
    let bytes = try #require(try purgedBytes(fixture, "Library/Caches/img1"), "\(log)")

    // What an app does with a cache entry: use it if it is there, else fetch it again.
    let program = try Command.run(
      "/bin/sh",
      ["-c", "test -e \"$1\" || head -c 300000 /dev/zero > \"$1\"", "sh", fixture.path("Library/Caches/img1")])
    #expect(program.status == 0, "\(program.error)")
    let missed = try Experiment.events(fixture.mountpoint, type: "missed", atLeast: 1)
    let recreated = try Experiment.events(fixture.mountpoint, type: "recreated", atLeast: 1)
    #expect(missed.map { $0["path"] as? String } == ["Library/Caches/img1"])
    try #require(recreated.count == 1, "\(recreated)")
    #expect(recreated[0]["path"] as? String == "Library/Caches/img1")
    #expect(Experiment.number(recreated[0], "purgedBytes") == bytes)
    let since = Experiment.number(recreated[0], "secondsSincePurge")
    #expect(since >= 0 && since < 60, "\(since)")
    let counters = try cost(fixture)
    #expect(Quota.number(counters, "recreated") == 1)
    #expect(Double(Quota.number(counters, "recreatedBytes")) == bytes)
    #expect(Quota.number(counters, "missed") == 1)
    // What the program wrote into it again, measured at its close.
    // What the program wrote into it again, measured at its last close (released after
    // the program's close returns).
    var st = stat()
    #expect(stat(fixture.backingPath("Library/Caches/img1"), &st) == 0 && st.st_size == 300_000)
    let rewritten = Int64(st.st_blocks) * 512
    #expect(try Quota.poll { Quota.number(try cost(fixture), "bytesWrittenAgain") == rewritten }, "\(rewritten)")

    // Created again, the name is forgotten: its next removal and re-creation cost nothing.
    #expect(unlink(fixture.path("Library/Caches/img1")) == 0)
    try Quota.writeFile(fixture.path("Library/Caches/img1"), count: 4096)
    #expect(Quota.number(try cost(fixture), "recreated") == 1)
    // Not purged, not counted: a new name, and a tmp file that was never purged.
    try Quota.writeFile(fixture.path("Library/Caches/new"), count: 4096)
    try Quota.writeFile(fixture.path("tmp/other"), count: 4096)
    #expect(Quota.statError(fixture.path("Library/Caches/never")) == ENOENT)
    let after = try cost(fixture)
    #expect(Quota.number(after, "recreated") == 1 && Quota.number(after, "missed") == 1)
    let human = try Command.run(Command.appbox, ["status", fixture.mountpoint])
    #expect(human.output.contains("purge cost:  1 purged files created again"), "\(human.output)")
    try fixture.unmount()
  }

  @Test("opens of Caches files are counted; reads too when they reach the daemon")
  func cacheHits() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M", "--no-passthrough"])
    try Quota.writeFile(fixture.path("Library/Caches/hit"), count: 256 << 10)
    try Quota.writeFile(fixture.path("tmp/not-a-cache"), count: 4096)
    #expect(Quota.waitForReleases(fixture))
    let before = try cost(fixture)
    for _ in 0..<3 { try Quota.use(fixture.path("Library/Caches/hit")) }
    try Quota.use(fixture.path("tmp/not-a-cache"))
    let writer = open(fixture.path("Library/Caches/hit"), O_WRONLY | O_CLOEXEC)  // storing is not a hit
    #expect(writer >= 0)
    close(writer)
    let after = try cost(fixture)
    #expect(Quota.number(after, "cacheOpens") - Quota.number(before, "cacheOpens") == 3)
    // The first read fills the page cache; later opens may be served from it.
    #expect(Quota.number(after, "cacheReads") > Quota.number(before, "cacheReads"))
    try fixture.unmount()
  }
}
