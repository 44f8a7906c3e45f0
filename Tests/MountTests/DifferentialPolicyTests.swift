// Randomized differential test with the policies on: the random operations of
// DifferentialTests, in Documents, Library/Caches and tmp of a small sandbox, mixed with
// lock and unlock, explicit purges, protection classes, Apple's and reserved attribute
// names, every fallocate mode and O_DIRECT opens. A local directory mirrors the whole
// mount; a model (Support/PolicyModel.swift) knows what a plain directory cannot: the
// lock state and each item's class (docs/reference.md's Data Protection table decides what must be EPERM), how the
// daemon serves each handle, and what purges removed (read from the event log and
// applied to the mirror, after checking them against the purge rules). Then every result
// must still agree, and at the end the trees, `used` against `du`, and the daemon's log.
//
// Environment: APPBOX_DIFF_SEED and APPBOX_DIFF_OPS, as for DifferentialTests; to hunt a
// bookkeeping error down, APPBOX_DIFF_BOOKS_EVERY=N compares `used` with `du` every N
// operations (stopping at the first difference) and APPBOX_DIFF_TRACE=1 prints each step.
import CPosixShim
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Differential with the policies: purges, locks, classes, xattrs", .needsFUSE, .timeLimit(.minutes(10)))
struct DifferentialPolicyTests {
  static let defaultSeed: UInt64 = 0xA9B0_C0DE_2024_0012
  static let defaultCount = 5000
  static let capacity: Int64 = 1 << 20

  @Test("random operations with purges, lock changes and classes agree with a model, and the books with du")
  func randomOperationsWithPolicies() throws {
    let environment = ProcessInfo.processInfo.environment
    let seed = environment["APPBOX_DIFF_SEED"].flatMap(DifferentialTests.parseSeed) ?? Self.defaultSeed
    let count = environment["APPBOX_DIFF_OPS"].flatMap { Int($0) } ?? Self.defaultCount
    print("DifferentialPolicyTests: seed \(seed) (0x\(String(seed, radix: 16))), \(count) operations")

    let fixture = try MountFixture(arguments: [
      "--unlocked", "--grace", "0", "--cx-timeout", "1h", "--capacity", String(Self.capacity),
    ])
    let localRoot = fixture.root + "/policy-local"
    for directory in ["", "/Documents", "/Library", "/Library/Caches", "/tmp"] {
      try #require(mkdir(localRoot + directory, 0o755) == 0)
    }
    for root in PolicyRun.roots {
      try #require(mkdir(localRoot + "/" + root, 0o755) == 0 && mkdir(fixture.path(root), 0o755) == 0)
    }
    let passthrough = try Quota.status(fixture.mountpoint)["passthrough"] as? Bool ?? false
    var run = try PolicyRun(fixture: fixture, localRoot: localRoot, seed: seed, passthrough: passthrough)
    let started = Date()
    let booksEvery = environment["APPBOX_DIFF_BOOKS_EVERY"].flatMap { Int($0) } ?? 0
    for index in 0..<count {
      try run.step(index)
      if run.failure != nil { break }
      if booksEvery > 0, index % booksEvery == 0 || index >= count - booksEvery {
        run.settleHandles()
        let used = Quota.number(try Quota.status(fixture.mountpoint), "used")
        let du = try Quota.du(fixture.backing)
        if used != du {
          print("DifferentialPolicyTests: after operation #\(index): used \(used), du \(du)")
          break
        }
      }
    }
    try run.finishOperations()
    print("DifferentialPolicyTests: " + run.tallyLine)
    print(
      "DifferentialPolicyTests: \(count) operations in \(String(format: "%.1f", Date().timeIntervalSince(started))) s"
        + (passthrough ? "" : " (passthrough off)") + (run.failure != nil ? " (stopped at the first mismatch)" : ""))
    if let failure = run.failure {
      Issue.record("seed \(seed): \(failure)")
    } else {
      try run.checkFinalState()
    }
    let log = ControlFiles.path(for: fixture.mountpoint, "log")
    try fixture.unmount()
    // A notification the kernel refused is logged by libfuse as "fuse: writing device: …".
    let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")  // throws if it is not there
    let failed = lines.filter { $0.contains("writing device") }
    #expect(
      failed.isEmpty, "seed \(seed): the daemon's log has failed notifications:\n\(failed.joined(separator: "\n"))")
  }
}
