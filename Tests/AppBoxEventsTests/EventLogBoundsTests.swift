import AppBoxEvents
import Testing

@Suite("Event log ids and retention")
struct EventLogBoundsTests {
  @Test("ids name the mount's start in UTC and a sequence within the second, and sort by it")
  func ids() {
    #expect(MountLogID.make(time: 0) == "19700101-000000-0000")
    #expect(MountLogID.make(time: 1_768_473_012.9) == "20260115-103012-0000")
    #expect(MountLogID.make(time: 1_768_473_012.9, after: "20260115-103012-0000") == "20260115-103012-0001")
    #expect(MountLogID.make(time: 1_768_473_012, after: "20260115-103012-00ff") == "20260115-103012-0100")
    #expect(MountLogID.make(time: 1_768_473_013, after: "20260115-103012-0007") == "20260115-103013-0000")
    #expect(MountLogID.make(time: 1_768_473_013, after: "an-old-id") == "20260115-103013-0000")
    #expect(MountLogID.make(time: 951_782_400) == "20000229-000000-0000")
    #expect(MountLogID.make(time: -1) == "19691231-235959-0000")
    #expect(MountLogID.make(time: 1e300).hasPrefix("33658"))
    var ids: [String] = []
    for time in [1_768_473_012.1, 1_768_473_012.2, 1_768_473_012.3, 1_768_473_013.0] {
      ids.append(MountLogID.make(time: time, after: ids.last))
    }
    #expect(ids == ids.sorted() && Set(ids).count == 4)
    for id in ["20260115-103012-3fa9", "a", "A_b-1"] { #expect(MountLogID.isValid(id)) }
    for id in ["", "-a", "a/b", "..", "a.b", "é", String(repeating: "a", count: 65), "a b"] {
      #expect(!MountLogID.isValid(id), "\(id)")
    }
  }

  @Test("earlier mounts' logs: the newest kept, within the count and the bytes")
  func retention() {
    let rule = EventLogRetention(mounts: 3, bytes: 100)
    let logs: [(id: String, bytes: Int64)] = [("1", 10), ("5", 50), ("3", 30), ("4", 40), ("2", 20)]
    // Newest first: 5 (50), 4 (40 → 90); 3 (30) would pass 100; 2 (20 → 110) too; 1 (10 → 100) fits.
    #expect(Set(rule.logsToRemove(logs)) == ["3", "2"])
    #expect(EventLogRetention(mounts: 0, bytes: 100).logsToRemove(logs).count == 5)
    #expect(EventLogRetention(mounts: 9, bytes: 1 << 40).logsToRemove(logs).isEmpty)
  }
}
