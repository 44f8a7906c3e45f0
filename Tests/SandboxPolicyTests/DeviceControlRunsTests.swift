import SandboxPolicy
import Testing

@Suite("device-control runs")
struct DeviceControlRunsTests {
  static func process(_ pid: Int32, _ start: UInt64 = 100) -> ProcessIdentity {
    ProcessIdentity(pid: pid, startTime: start)
  }

  static func chain(_ pids: [Int32]) -> Ancestry { .known(pids.map { process($0) }) }

  /// Runs registered as refusing ones, from outside any run (pid, then its parent 1).
  static func runs(_ pids: [Int32]) -> DeviceControlRuns {
    var runs = DeviceControlRuns()
    for pid in pids { runs.register(process(pid), ancestry: chain([pid, 1]), allowsControl: false) }
    return runs
  }

  /// Refusing runs, ancestry (pids, itself first), decision.
  static let cases: [([Int32], [Int32], DeviceControlRuns.Decision)] = [
    ([], [50, 10, 1], .allowed),
    ([10], [50, 10, 1], .refused(run: 10)),  // the run's program
    ([10], [60, 50, 10, 1], .refused(run: 10)),  // its grandchild, or an orphan kept by the run
    ([10], [10, 1], .allowed),  // the keeper itself
    ([10], [20, 1], .allowed),  // outside the run
    ([10, 30], [60, 30, 1], .refused(run: 30)),  // another run's program
  ]

  @Test("who may change the device", arguments: cases)
  func decide(_ runs: [Int32], _ chain: [Int32], _ expected: DeviceControlRuns.Decision) {
    #expect(Self.runs(runs).decide(Self.chain(chain)) == expected)
  }

  @Test("an unreadable ancestry is refused while a run is recorded, allowed while none is")
  func unknownAncestry() {
    #expect(DeviceControlRuns().decide(.unknown("gone")) == .allowed)
    #expect(Self.runs([10]).decide(.unknown("gone")) == .unverifiable("gone"))
  }

  @Test("a reused pid is another process: its start time differs")
  func reusedPID() {
    let runs = Self.runs([10])
    #expect(runs.decide(.known([Self.process(50), Self.process(10, 999), Self.process(1)])) == .allowed)
  }

  @Test("only refusing runs outside every refusing run are recorded; an unknown ancestry is recorded")
  func whatIsRecorded() {
    var runs = DeviceControlRuns()
    #expect(runs.register(Self.process(10), ancestry: Self.chain([10, 1]), allowsControl: true) == .allowsControl)
    #expect(runs.isEmpty, "a run that allows control refuses nothing")
    #expect(runs.register(Self.process(10), ancestry: Self.chain([10, 1]), allowsControl: false) == .recorded)
    // Its program starts a nested run: covered by the outer run already.
    let nested = runs.register(Self.process(60), ancestry: Self.chain([60, 50, 10, 1]), allowsControl: false)
    #expect(nested == .coveredBy(run: 10))
    // A run whose ancestry could not be read is recorded: a record only ever refuses.
    #expect(runs.register(Self.process(70), ancestry: .unknown("EMFILE"), allowsControl: false) == .recorded)
    #expect(runs.runs == [Self.process(10), Self.process(70)])
    #expect(runs.decide(Self.chain([71, 70, 1])) == .refused(run: 70))
  }

  @Test("a program registering as many processes as it likes adds nothing")
  func programCannotFill() {
    var runs = Self.runs([10])
    for pid in Int32(100)..<Int32(20_100) {
      let registration = runs.register(
        Self.process(pid), ancestry: Self.chain([pid, 50, 10, 1]), allowsControl: pid % 2 == 0)
      #expect(registration == (pid % 2 == 0 ? .allowsControl : .coveredBy(run: 10)))
    }
    #expect(runs.runs.count == 1)
    // Another run from outside is still recorded, and refuses its own program.
    #expect(runs.register(Self.process(20), ancestry: Self.chain([20, 1]), allowsControl: false) == .recorded)
    #expect(runs.decide(Self.chain([21, 20, 1])) == .refused(run: 20))
  }

  @Test("gone runs are looked for once the count has doubled since the last time, and forgotten")
  func pruning() {
    var runs = DeviceControlRuns()
    var registered = 0
    while !runs.needsPruning {
      registered += 1
      runs.register(
        Self.process(Int32(registered + 1)), ancestry: Self.chain([Int32(registered + 1), 1]), allowsControl: false)
    }
    #expect(registered == DeviceControlRuns.minimumPruneSize)
    // A quarter are gone.
    runs.forget(Set(runs.runs.filter { $0.pid % 4 == 0 }))
    let left = runs.runs.count
    #expect(left == registered * 3 / 4)
    #expect(!runs.needsPruning)
    // Due again at twice the count left.
    while !runs.needsPruning {
      registered += 1
      runs.register(
        Self.process(Int32(registered + 1)), ancestry: Self.chain([Int32(registered + 1), 1]), allowsControl: false)
    }
    #expect(runs.runs.count == 2 * left)
    runs.forget(runs.runs)
    #expect(runs.isEmpty)
  }
}

@Suite("control connection shares")
struct ControlConnectionSharesTests {
  @Test("one run holds at most perRunLimit, refusing runs together at most confinedLimit; the rest is everyone's")
  func shares() {
    var shares = ControlConnectionShares()
    var held = 0
    while shares.admit(.run(10)) { held += 1 }
    #expect(held == ControlConnectionShares.perRunLimit)
    var others = 0
    for run in Int32(11)...Int32(20) where shares.admit(.run(run)) { others += 1 }
    #expect(held + others == ControlConnectionShares.confinedLimit)
    let unverifiable = shares.admit(.unverifiable)
    #expect(!unverifiable)
    var unconfined = 0
    for _ in 0..<100 where shares.admit(.unconfined) { unconfined += 1 }
    #expect(unconfined == 100)
    shares.release(.run(10))
    #expect(shares.count(.run(10)) == ControlConnectionShares.perRunLimit - 1)
    let freed = shares.admit(.unverifiable)
    #expect(freed, "a released connection is free again")
    let over = shares.admit(.run(10))
    #expect(!over)
  }

  @Test("the holder of a connection follows the decision on its process")
  func holder() {
    #expect(ControlConnectionShares.Holder(.allowed) == .unconfined)
    #expect(ControlConnectionShares.Holder(.refused(run: 7)) == .run(7))
    #expect(ControlConnectionShares.Holder(.unverifiable("x")) == .unverifiable)
  }
}
