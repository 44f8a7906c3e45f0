import Testing

@testable import SandboxPolicy

@Suite("Protection counters")
struct ProtectionCountersTests {
  @Test func counters() {
    var counters = ProtectionCounters()
    #expect(counters.totalRefusals == 0)
    counters.recordRefusal(.complete, .openExisting)
    counters.recordRefusal(.complete, .handleIO)
    counters.recordRefusal(.completeUnlessOpen, .openExisting)
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
