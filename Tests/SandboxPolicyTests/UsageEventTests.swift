import Testing

@testable import SandboxPolicy

@Suite("UsageEvent")
struct UsageEventTests {
  let sample = UsageSample(
    used: 1_048_576, capacity: 33_554_432, caches: 524_288, tmp: 4096, purges: 3, bytesPurged: 12288, noSpace: 2)

  @Test func jsonLine() {
    let event = UsageEvent(time: 1_700_000_000.5, sample: sample, state: .locked, reason: .interval)
    #expect(
      event.jsonLine
        == #"{"type":"usage","time":1700000000.5,"used":1048576,"capacity":33554432,"caches":524288,"tmp":4096,"#
        + #""purges":3,"bytesPurged":12288,"noSpace":2,"state":"LOCKED","reason":"interval"}"#)
  }

  @Test("mount, capacity and unmount samples are always logged; interval ones only after a change")
  func rule() {
    for reason in [UsageEvent.Reason.mount, .capacity, .unmount] {
      #expect(sample.shouldRecord(reason, after: sample))
      #expect(sample.shouldRecord(reason, after: nil))
    }
    #expect(sample.shouldRecord(.interval, after: nil))
    #expect(!sample.shouldRecord(.interval, after: sample))
    var changed = sample
    changed.purges += 1  // a purge alone that left the usage as it was: its events tell
    #expect(!changed.shouldRecord(.interval, after: sample))
    for change in [\UsageSample.used, \UsageSample.capacity] {
      var other = sample
      other[keyPath: change] += 4096
      #expect(other.shouldRecord(.interval, after: sample))
    }
    var refused = sample
    refused.noSpace += 1
    #expect(refused.shouldRecord(.interval, after: sample))
  }
}
