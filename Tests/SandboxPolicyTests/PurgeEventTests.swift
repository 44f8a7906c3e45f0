import Testing

@testable import SandboxPolicy

@Suite("PurgeEvent")
struct PurgeEventTests {
  @Test func jsonLine() {
    let event = PurgeEvent(
      time: 1_700_000_000.5, path: [Array("Library".utf8), Array("Caches".utf8), Array("a \"b\".dat".utf8)],
      bytes: 4096, domain: .caches, reason: .pressure, lastUse: 1_699_999_000)
    #expect(
      event.jsonLine
        == #"{"type":"purge","time":1700000000.5,"path":"Library/Caches/a \"b\".dat","bytes":4096,"#
        + #""domain":"caches","reason":"pressure","lastUse":1699999000.0}"#)
  }

  @Test func nonUTF8PathIsLossless() {
    let event = PurgeEvent(
      time: 2, path: [Array("tmp".utf8), [0xFF, 0x0A]], bytes: 1, domain: .tmp, reason: .age,
      lastUse: 1)
    #expect(
      event.jsonLine
        == "{\"type\":\"purge\",\"time\":2.0,\"path\":\"tmp/\u{FFFD}\\u000a\",\"pathHex\":\"746d702fff0a\","
        + "\"bytes\":1,\"domain\":\"tmp\",\"reason\":\"age\",\"lastUse\":1.0}")
    #expect(!event.jsonLine.contains("\n"))
  }

  @Test(arguments: PurgeEvent.Reason.allCases)
  func reasons(_ reason: PurgeEvent.Reason) {
    let event = PurgeEvent(time: 0, path: [], bytes: 0, domain: .tmp, reason: reason, lastUse: 0)
    #expect(event.jsonLine.contains("\"reason\":\"\(reason.rawValue)\""))
  }
}
