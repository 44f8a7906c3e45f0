import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Everything that moves the quota at once, sized for CI: programs holding and re-opening
/// their cache files, writers filling the quota, explicit purges, lock/unlock cycles and
/// attribute writes. Then: no open file was purged, no `O_CREAT` open failed with
/// ENOENT, the books equal `du` within the capacity, every Documents file is intact, and
/// the daemon's memory stays flat.
@Suite("Quota stress", .needsFUSE, .timeLimit(.minutes(3)))
struct QuotaStressTests {
  @Test("re-openers, fillers, purges, lock cycles and xattr writes at once: books exact, no open file purged")
  func everythingAtOnce() throws {
    let capacity: Int64 = 6 << 20
    let fixture = try MountFixture.unlocked(["--capacity", "6M", "--grace", "0"])
    var documents: [String: [UInt8]] = [:]
    for index in 0..<8 {
      let path = fixture.path("Documents/keep\(index)")
      documents[path] = try Quota.writeFile(path, count: 40_000 + index * 1000, seed: UInt64(index))
    }
    let mountpoint = fixture.mountpoint
    let purges: @Sendable (Date) -> [String] = { deadline in
      var failures: [String] = []
      while Date() < deadline {
        let result = try? Command.run(Command.appbox, ["purge", mountpoint, "--bytes", "1M"])
        if result?.status != 0 { failures.append("appbox purge: \(result?.error ?? "did not run")") }
      }
      return failures
    }
    let lockCycles: @Sendable (Date) -> [String] = { deadline in
      var failures: [String] = []
      while Date() < deadline {
        for command in ["lock", "unlock"] {
          let result = try? Command.run(Command.appbox, [command, mountpoint])
          if result?.status != 0 { failures.append("appbox \(command): \(result?.error ?? "did not run")") }
        }
      }
      return failures
    }
    let xattrWriter: @Sendable (Date) -> [String] = { deadline in
      var failures: [String] = []
      var round = 0
      while Date() < deadline {
        round += 1
        let value = pattern(1500, seed: UInt64(round))
        for target in ["Library/Caches/h\(round % 10)", "Documents/keep\(round % 8)"] {
          let result = setXattr(mountpoint + "/" + target, "user.stress", value)
          // A cache file may be purged (or not created yet); a full sandbox refuses.
          if result != 0, result != ENOENT, result != ENOSPC {
            failures.append("setxattr \(target): \(String(cString: strerror(result)))")
          }
        }
      }
      return failures
    }
    let churn = { (seconds: Double) in
      Churn.run(
        fixture, seconds: seconds, reopeners: 10, fillers: 4, extra: [purges, lockCycles, xattrWriter, xattrWriter])
    }
    // A first round brings the daemon's tables, caches and thread pools to their size (as
    // long as the second: under load, a short one left thread pools and bounded tables,
    // such as the names of purged files, still growing); a second must then leave its
    // memory where it was.
    let daemon = try #require(MountFixture.daemonPID(for: fixture.mountpoint), "no daemon")
    let warmUp = churn(6)
    let warm = try Self.residentKiB(daemon)
    let result = churn(6)
    let after = try Self.residentKiB(daemon)
    #expect(after - warm < 8192, "the daemon's RSS grew from \(warm) to \(after) KiB")
    #expect(warmUp.failures.isEmpty, "\(warmUp.failures.prefix(10)) (\(warmUp.failures.count) in all)")
    #expect(result.failures.isEmpty, "\(result.failures.prefix(10)) (\(result.failures.count) in all)")
    #expect(result.reopens > 50, "the re-openers ran (\(result.reopens))")
    try fixture.control("unlock")
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    let du = try Quota.du(fixture.backing)
    #expect(du <= capacity, "du \(du) over the capacity by \(du - capacity)")
    for (path, content) in documents.sorted(by: { $0.key < $1.key }) {
      #expect(Quota.matches(path, content), "\(path) intact")
    }
    try fixture.unmount()
  }

  /// A process's resident memory (`VmRSS`), in KiB.
  static func residentKiB(_ pid: pid_t) throws -> Int {
    let status = String(decoding: try readFile("/proc/\(pid)/status"), as: UTF8.self)
    let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }, "no VmRSS")
    return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]), "\(line)")
  }
}
