import SandboxPolicy
import Testing

@Suite("Purged names and purge-cost counters")
struct PurgedNamesTests {
  func key(_ name: String, in directory: UInt64 = 7) -> PurgedNames.Key {
    PurgedNames.Key(directory: directory, name: Array(name.utf8))
  }

  @Test("a re-creation is found once and forgets the name; a miss is counted once per purge")
  func recreateAndMiss() {
    var names = PurgedNames(limit: 8)
    names.remember(key("a"), bytes: 4096, time: 10)
    #expect(names.miss(key("a", in: 8)) == nil, "another directory's name")
    #expect(names.miss(key("a"))?.bytes == 4096)
    #expect(names.miss(key("a")) == nil, "one miss per purge")
    let record = names.recreate(key("a"))
    #expect(record?.time == 10 && record?.missed == true)
    #expect(names.recreate(key("a")) == nil)
    #expect(names.count == 0)
    names.remember(key("a"), bytes: 1, time: 20)
    #expect(names.miss(key("a"))?.time == 20, "purged again: missed again")
  }

  @Test("bounded: the oldest purges are forgotten first")
  func bounded() {
    var names = PurgedNames(limit: 3)
    for index in 0..<5 { names.remember(key("f\(index)"), bytes: Int64(index), time: Double(index)) }
    #expect(names.count == 3)
    #expect(names.recreate(key("f0")) == nil && names.recreate(key("f1")) == nil)
    #expect(names.recreate(key("f4"))?.bytes == 4)
    // A name purged again counts from its latest purge, and is not forgotten early.
    names.remember(key("f2"), bytes: 22, time: 22)
    names.remember(key("g"), bytes: 0, time: 23)
    names.remember(key("h"), bytes: 0, time: 24)
    #expect(names.count <= 3)
    #expect(names.miss(key("f2"))?.bytes == 22)
    for index in 0..<1000 { names.remember(key("x\(index)"), bytes: 0, time: 0) }
    #expect(names.count == 3)
  }

  @Test("purge-cost counters add up")
  func counters() {
    var counters = PurgeCostCounters()
    counters.count(.recreated, purgedBytes: 10)
    counters.count(.recreated, purgedBytes: 5)
    counters.count(.missed, purgedBytes: 10)
    #expect(counters.recreated == 2 && counters.recreatedBytes == 15 && counters.missed == 1)
  }
}
