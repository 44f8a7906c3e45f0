import AppBoxEvents
import SandboxPolicy
import Testing

/// The JSON users see (docs/reference.md, "Events"), byte for byte as earlier versions
/// wrote it by hand: the schema changed how lines are made, not what they say.
@Suite("Event lines as users see them")
struct EventLinesTests {
  func line(_ event: AppBoxEvent) throws -> String { String(decoding: try event.encoded(), as: UTF8.self) }

  @Test func refusal() throws {
    let event = ProtectionEvent(
      time: 1_700_000_000.25, path: "Documents/a \"b\".txt", protectionClass: .complete,
      operation: .openExisting, state: .locked)
    #expect(
      try line(.refusal(event))
        == #"{"type":"refusal","time":1700000000.25,"path":"Documents/a \"b\".txt","#
        + #""class":"complete","operation":"openExisting","state":"LOCKED"}"#)
  }

  @Test("a path that is not UTF-8 keeps its bytes in pathHex")
  func refusalNonUTF8() throws {
    let event = ProtectionEvent(
      time: 1, pathBytes: [0x44, 0x2F, 0xFF, 0x0A], protectionClass: .completeWhenUserInactive,
      operation: .handleIO, state: .locked)
    #expect(event.path == "D/\u{FFFD}\n")
    #expect(
      try line(.refusal(event))
        == "{\"type\":\"refusal\",\"time\":1.0,\"path\":\"D/\u{FFFD}\\u000a\",\"pathHex\":\"442fff0a\","
        + "\"class\":\"completeWhenUserInactive\",\"operation\":\"handleIO\",\"state\":\"LOCKED\"}")
  }

  @Test("a coalesced refusal adds its count and the last time")
  func coalescedRefusal() throws {
    let event = ProtectionEvent(
      time: 10.5, pathBytes: Array("Documents/a".utf8), protectionClass: .complete, operation: .openExisting,
      state: .locked, count: 4999, last: 11.25)
    #expect(
      try line(.refusal(event))
        == #"{"type":"refusal","time":10.5,"path":"Documents/a","class":"complete","operation":"openExisting","#
        + #""state":"LOCKED","count":4999,"last":11.25}"#)
  }

  @Test func state() throws {
    var machine = LockStateMachine(startUnlocked: true)
    let locked = machine.lock(at: 0)
    let change = try #require(locked)
    #expect(
      try line(.state(DeviceStateEvent(time: 1_700_000_000.5, change: change)))
        == #"{"type":"state","time":1700000000.5,"from":"UNLOCKED","to":"GRACE"}"#)
    #expect(
      try line(.state(DeviceStateEvent(time: 2, from: .grace, to: .locked)))
        == #"{"type":"state","time":2.0,"from":"GRACE","to":"LOCKED"}"#)
  }

  @Test func purge() throws {
    let event = PurgeEvent(
      time: 1_700_000_000.5, path: [Array("Library".utf8), Array("Caches".utf8), Array("a \"b\".dat".utf8)],
      bytes: 4096, domain: .caches, reason: .pressure, lastUse: 1_699_999_000)
    #expect(
      try line(.purge(event))
        == #"{"type":"purge","time":1700000000.5,"path":"Library/Caches/a \"b\".dat","bytes":4096,"#
        + #""domain":"caches","reason":"pressure","lastUse":1699999000.0}"#)
    let odd = PurgeEvent(
      time: 2, path: [Array("tmp".utf8), [0xFF, 0x0A]], bytes: 1, domain: .tmp, reason: .age, lastUse: 1)
    #expect(
      try line(.purge(odd))
        == "{\"type\":\"purge\",\"time\":2.0,\"path\":\"tmp/\u{FFFD}\\u000a\",\"pathHex\":\"746d702fff0a\","
        + "\"bytes\":1,\"domain\":\"tmp\",\"reason\":\"age\",\"lastUse\":1.0}")
  }

  @Test(arguments: PurgeReason.allCases)
  func purgeReasons(_ reason: PurgeReason) throws {
    let event = PurgeEvent(time: 0, pathBytes: [], bytes: 0, domain: .tmp, reason: reason, lastUse: 0)
    #expect(try line(.purge(event)).contains("\"reason\":\"\(reason.rawValue)\""))
  }

  @Test func purgeCost() throws {
    let event = PurgeCostEvent(
      kind: .recreated, time: 12.5, path: Array("Library/Caches/a".utf8), purgedBytes: 4096, secondsSincePurge: 2.5)
    #expect(
      try line(.purgeCost(event))
        == #"{"type":"recreated","time":12.5,"path":"Library/Caches/a","purgedBytes":4096,"secondsSincePurge":2.5}"#)
    let odd = PurgeCostEvent(kind: .missed, time: 1, path: [0x74, 0xFF], purgedBytes: 0, secondsSincePurge: 0)
    #expect(
      try line(.purgeCost(odd)).contains("\"type\":\"missed\"")
        && line(.purgeCost(odd)).contains("\"pathHex\":\"74ff\""))
  }

  @Test("a class that cannot be used: its value (exact, or in hex), or the error that kept it from being read")
  func unreadableClass() throws {
    let parsed = UnreadableClassEvent(
      time: 1_796_017_593, pathBytes: Array("Documents/a".utf8), attribute: "user.appbox.protection",
      value: Array("Complete".utf8), error: nil)
    #expect(
      try line(.unreadableClass(parsed))
        == #"{"type":"unreadableClass","time":1796017593.0,"path":"Documents/a","attribute":"user.appbox.protection","#
        + #""value":"Complete","class":"complete"}"#)
    let binary = UnreadableClassEvent(
      time: 1, pathBytes: Array("a".utf8), attribute: "user.appbox.protection", value: [0x63, 0x00, 0xFF], error: nil)
    #expect(
      try line(.unreadableClass(binary))
        == "{\"type\":\"unreadableClass\",\"time\":1.0,\"path\":\"a\",\"attribute\":\"user.appbox.protection\","
        + "\"value\":\"c\\u0000\u{FFFD}\",\"valueHex\":\"6300ff\",\"class\":\"complete\"}")
    let unread = UnreadableClassEvent(
      time: 1, pathBytes: Array("a".utf8), attribute: "user.appbox.protection", value: nil, error: "EIO")
    #expect(
      try line(.unreadableClass(unread)).hasSuffix(
        #""attribute":"user.appbox.protection","error":"EIO","class":"complete"}"#))
    let long = UnreadableClassEvent(
      time: 1, pathBytes: [], attribute: "x", value: [UInt8](repeating: 0x41, count: 1000), error: nil)
    #expect(long.value?.count == UnreadableClassEvent.valueLimit)
  }

  @Test func capacity() throws {
    let event = CapacityEvent(time: 2.5, from: 64 << 20, to: 32 << 20, reason: .schedule)
    #expect(
      try line(.capacity(event))
        == #"{"type":"capacity","time":2.5,"from":67108864,"to":33554432,"reason":"schedule"}"#)
  }

  @Test func usage() throws {
    let sample = UsageSample(
      used: 1_048_576, capacity: 33_554_432, caches: 524_288, tmp: 4096, purges: 3, bytesPurged: 12288, noSpace: 2)
    #expect(
      try line(.usage(UsageEvent(time: 1_700_000_000.5, sample: sample, state: .locked, reason: .interval)))
        == #"{"type":"usage","time":1700000000.5,"used":1048576,"capacity":33554432,"caches":524288,"tmp":4096,"#
        + #""purges":3,"bytesPurged":12288,"noSpace":2,"state":"LOCKED","reason":"interval"}"#)
  }

  @Test("mount, purge, capacity and unmount samples are always logged; interval ones only after a change")
  func usageRule() {
    let sample = UsageSample(
      used: 1_048_576, capacity: 33_554_432, caches: 524_288, tmp: 4096, purges: 3, bytesPurged: 12288, noSpace: 2)
    for reason in [UsageEvent.Reason.mount, .purge, .capacity, .unmount] {
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

  @Test("a header, and after a rotation the events before it; the rotation mark")
  func logStructure() throws {
    #expect(
      try line(.log(LogHeader(mount: "20260115-103012-3fa9", time: 5)))
        == #"{"type":"log","version":1,"mount":"20260115-103012-3fa9","time":5.0,"segment":0}"#)
    #expect(
      try line(.log(LogHeader(mount: "m", time: 5, segment: 3, eventsBefore: 7)))
        == #"{"type":"log","version":1,"mount":"m","time":5.0,"segment":3,"eventsBefore":7}"#)
    #expect(
      try line(.rotate(LogRotation(mount: "m", time: 6, nextSegment: 4)))
        == #"{"type":"rotate","time":6.0,"mount":"m","nextSegment":4}"#)
  }

  @Test(
    "strings are escaped as JSONText escapes them",
    arguments: [
      "", "plain", "quote \" backslash \\ slash /", "\u{0}\u{1}\u{1F}\u{7F}", "tab\tnew\nline\r",
      "\u{2028}\u{2029}", "x\u{2028}", "\u{2027}\u{202A}", "é€😀", "\u{FFFD}", "\u{E2}\u{80}",
    ])
  func escaping(_ text: String) throws {
    let header = LogHeader(mount: text, time: 0)
    let encoded = try line(.log(header))
    #expect(encoded.contains("\"mount\":" + JSONText.quoted(text) + ","))
  }
}
