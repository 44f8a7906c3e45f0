import Testing

@testable import SandboxPolicy

@Suite("Protection events and counters")
struct ProtectionEventTests {
  @Test func refusalLine() {
    let event = ProtectionEvent(
      time: 1_700_000_000.25, path: "Documents/a \"b\".txt", protectionClass: .complete,
      operation: .openExisting, state: .locked)
    #expect(
      event.jsonLine
        == #"{"type":"refusal","time":1700000000.25,"path":"Documents/a \"b\".txt","#
        + #""class":"complete","operation":"openExisting","state":"LOCKED"}"#)
    #expect(!event.jsonLine.contains("\n"))
  }

  @Test func refusalLineWithNonUTF8PathIsLossless() {
    let bytes: [UInt8] = [0x44, 0x2F, 0xFF, 0x0A]
    let event = ProtectionEvent(
      time: 1, pathBytes: bytes, protectionClass: .completeWhenUserInactive,
      operation: .handleIO, state: .locked)
    #expect(event.path == "D/\u{FFFD}\n")
    #expect(
      event.jsonLine
        == "{\"type\":\"refusal\",\"time\":1.0,\"path\":\"D/\u{FFFD}\\u000a\",\"pathHex\":\"442fff0a\","
        + "\"class\":\"completeWhenUserInactive\",\"operation\":\"handleIO\",\"state\":\"LOCKED\"}")
  }

  @Test func stateLine() {
    var machine = LockStateMachine(startUnlocked: true)
    let change = machine.lock(at: 0)!
    let event = DeviceStateEvent(time: 1_700_000_000.5, change: change)
    #expect(
      event.jsonLine == #"{"type":"state","time":1700000000.5,"from":"UNLOCKED","to":"GRACE"}"#)
    #expect(
      DeviceStateEvent(time: 2, from: .grace, to: .locked).jsonLine
        == #"{"type":"state","time":2.0,"from":"GRACE","to":"LOCKED"}"#)
  }

  @Test func counters() {
    var counters = ProtectionCounters()
    #expect(counters.totalRefusals == 0)
    counters.recordRefusal(.complete, .openExisting)
    counters.recordRefusal(.complete, .handleIO)
    counters.record(
      ProtectionEvent(
        time: 0, path: "x", protectionClass: .completeUnlessOpen, operation: .openExisting,
        state: .bfu))
    #expect(counters.totalRefusals == 3)
    #expect(counters.refusals(for: .complete) == 2)
    #expect(counters.refusals(for: .completeUnlessOpen) == 1)
    #expect(counters.refusals(for: ProtectionClass.none) == 0)
    #expect(counters.refusals(for: .openExisting) == 2)
    #expect(counters.refusals(for: .handleIO) == 1)
    #expect(counters.refusals(for: .metadata) == 0)
    #expect(
      counters.jsonObject
        == #"{"total":3,"byClass":{"complete":2,"completeUnlessOpen":1,"#
        + #""completeUntilFirstUserAuthentication":0,"completeWhenUserInactive":0,"none":0},"#
        + #""byOperation":{"createNew":0,"openExisting":2,"handleIO":1,"metadata":0}}"#)
  }
}
