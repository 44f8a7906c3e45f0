import AppBoxEvents
import Testing

@testable import AppBoxReport

@Suite("ReportSummary")
struct ReportSummaryTests {
  let summary = ReportSummary(EventLogParser.parse(ReportFixtures.log).events)

  @Test func counts() {
    #expect(summary.events == 17 && summary.usageSamples == 5)
    #expect(summary.duration == 10)
    #expect(summary.purges == 4 && summary.bytesPurged == 2_883_584)
    #expect(
      summary.purgeGroups == [
        .init(domain: "caches", reason: "pressure", files: 2, bytes: 1_572_864),
        .init(domain: "caches", reason: "shrink", files: 1, bytes: 262_144),
        .init(domain: "tmp", reason: "pressure", files: 1, bytes: 1_048_576),
      ])
    #expect(summary.firstCapacity == 4_194_304 && summary.lastCapacity == 2_097_152)
    #expect(summary.smallestCapacity == 2_097_152 && summary.largestCapacity == 4_194_304)
    #expect(summary.capacityChanges == 1)
    #expect(summary.peakUsed == 3_145_728 && summary.lastUsed == 2_097_152)
    #expect(summary.refusals == 1)
    #expect(summary.noSpace == 5)
  }

  @Test("a missed lookup and the re-creation that follows are one purge paid for; a miss alone is one")
  func purgeCost() {
    #expect(summary.recreated == 1 && summary.recreatedBytes == 1_048_576)
    #expect(summary.missed == 2 && summary.missedNotRecreated == 1)
    #expect(summary.purgeCost == 2)
    #expect(summary.medianSecondsToCost == 1)
  }

  @Test func lockStates() {
    #expect(summary.stateChanges == 3)
    #expect(summary.timeInState.map(\.state) == ["UNLOCKED", "GRACE", "LOCKED"])
    #expect(summary.timeInState.map(\.seconds) == [7, 1, 2])
  }

  @Test("the terminal summary and the table rows say the same")
  func rows() {
    let rows = summary.rows
    let keys = rows.map(\.key)
    #expect(keys.contains("purged.caches.shrink"))
    #expect(rows.first { $0.key == "purgeCost" }?.value == 2)
    #expect(rows.first { $0.key == "noSpace" }?.value == 5)
    #expect(rows.first { $0.key == "bytesPurged" }?.text == "2.8 MiB")
    for row in rows { #expect(summary.text.contains(row.text), "\(row.key)") }
  }

  @Test("an empty log, and one without usage samples")
  func empty() {
    let empty = ReportSummary([])
    #expect(empty.events == 0 && empty.duration == 0 && empty.noSpace == nil && empty.purgeCost == 0)
    #expect(empty.text.contains("no usage samples"))
    let old = ReportSummary([
      .state(DeviceStateEvent(time: 1, from: .unlocked, to: .grace)),
      .state(DeviceStateEvent(time: 3, from: .grace, to: .locked)),
    ])
    #expect(old.timeInState.map(\.seconds) == [0, 2, 0])
  }
}
