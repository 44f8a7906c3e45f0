import SandboxPolicy
import Testing

@Suite("device-control runs")
struct DeviceControlRunsTests {
  static func process(_ pid: Int32, _ start: UInt64 = 100) -> ProcessIdentity {
    ProcessIdentity(pid: pid, startTime: start)
  }

  static func runs(_ entries: [(Int32, Bool, Bool)]) -> DeviceControlRuns {
    var runs = DeviceControlRuns()
    for (pid, allows, itself) in entries {
      runs.register(process(pid), .init(allowsControl: allows, coversItself: itself, run: pid))
    }
    return runs
  }

  /// Registered (pid, allows control, covers itself), ancestry (pids, itself first), decision.
  static let cases: [([(Int32, Bool, Bool)], [Int32], DeviceControlRuns.Decision)] = [
    ([], [50, 10, 1], .allowed),
    ([(10, false, false)], [50, 10, 1], .refused(run: 10)),  // the run's program
    ([(10, false, false)], [60, 50, 10, 1], .refused(run: 10)),  // its grandchild
    ([(10, false, false)], [10, 1], .allowed),  // appbox run itself
    ([(10, false, false)], [20, 1], .allowed),  // outside the run
    ([(10, true, false)], [50, 10, 1], .allowed),  // --allow-device-control
    ([(10, false, false), (50, true, false)], [60, 50, 10, 1], .refused(run: 10)),  // nested: the outer refuses
    ([(10, true, false), (50, false, false)], [60, 50, 10, 1], .refused(run: 50)),
    ([(70, false, true)], [70, 1], .refused(run: 70)),  // a member left behind
    ([(70, false, true)], [71, 70, 1], .refused(run: 70)),  // and its children
  ]

  @Test("who may change the device", arguments: cases)
  func decide(_ entries: [(Int32, Bool, Bool)], _ chain: [Int32], _ expected: DeviceControlRuns.Decision) {
    #expect(Self.runs(entries).decide(chain.map { Self.process($0) }) == expected)
  }

  @Test("a reused pid is another process: its start time differs")
  func reusedPID() {
    let runs = Self.runs([(10, false, false)])
    #expect(runs.decide([Self.process(50), Self.process(10, 999), Self.process(1)]) == .allowed)
  }

  @Test("descendants of a run, at any depth, without the run itself or strangers")
  func descendants() {
    let chains: [[Int32]] = [[10, 1], [50, 10, 1], [60, 50, 10, 1], [20, 1], [1]]
    let found = DeviceControlRuns.descendants(
      of: Self.process(10), among: chains.map { $0.map { Self.process($0) } })
    #expect(found.map(\.pid) == [50, 60])
  }

  @Test("at most maximumEntries, then registration is refused; a gone process is forgotten")
  func bounded() {
    var runs = DeviceControlRuns()
    let entry = DeviceControlRuns.Entry(allowsControl: false, coversItself: true, run: 1)
    var registered = 0
    for pid in 1...Int32(DeviceControlRuns.maximumEntries) where runs.register(Self.process(pid), entry) {
      registered += 1
    }
    #expect(registered == DeviceControlRuns.maximumEntries)
    let beyond = runs.register(Self.process(-1), entry)
    #expect(!beyond)
    let update = runs.register(Self.process(1), entry)
    #expect(update, "an update of a registered one")
    runs.removeAll { $0.pid > 1 }
    #expect(runs.entries.count == 1)
    runs.remove(Self.process(1))
    #expect(runs.isEmpty)
  }
}
