import Testing

@testable import AppBoxReport

@Suite("ReportTimeline")
struct ReportTimelineTests {
  let timeline = ReportTimeline(EventLogParser.parse(ReportFixtures.log).events)

  @Test func series() {
    #expect(timeline.duration == 10)
    #expect(timeline.used.map(\.time) == [0, 1, 4, 7, 10])
    #expect(timeline.capacity.map(\.value).first == 4_194_304)
    #expect(timeline.capacity.map(\.value).last == 2_097_152)
    #expect(timeline.purges.map(\.value).reduce(0, +) == 2_883_584)
    #expect(timeline.costs.count == 3)
    #expect(timeline.noSpace.map(\.time) == [7, 10] && timeline.noSpace.map(\.value) == [3, 2])
    #expect(timeline.capacityChanges.map(\.time) == [4])
    #expect(timeline.refusals.map(\.time) == [6.5])
  }

  @Test("lock states end to end, from the mount's sample to the last event")
  func states() {
    #expect(
      timeline.states == [
        .init(start: 0, end: 5, state: "UNLOCKED"), .init(start: 5, end: 6, state: "GRACE"),
        .init(start: 6, end: 8, state: "LOCKED"), .init(start: 8, end: 10, state: "UNLOCKED"),
      ])
  }

  @Test("binning keeps the sums and counts")
  func bins() {
    let bins = timeline.binned(timeline.purges, count: 10)
    #expect(bins.map(\.count) == [3, 1])
    #expect(bins.map(\.sum).reduce(0, +) == 2_883_584)
    #expect(timeline.binned([], count: 10).isEmpty)
    #expect(ReportTimeline([]).binned([.init(time: 0, value: 1)], count: 4).map(\.count) == [1])
  }
}
