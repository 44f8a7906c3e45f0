import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Directories moving in and out of Caches and tmp while fillers force purges: a purge
/// that chose a file before its directory moved to Documents must never unlink it there.
@Suite("Directories moving between domains under purges", .needsFUSE, .timeLimit(.minutes(5)))
struct DomainMoveStressTests {
  @Test(
    "renames of directories in and out of Caches and tmp while fillers force purges: no Documents file lost, books exact"
  )
  func movesUnderPurges() throws {
    let capacity: Int64 = 8 << 20
    let fixture = try MountFixture.unlocked(["--capacity", "8M"])
    let mountpoint = fixture.mountpoint
    let purges: @Sendable (Date) -> [String] = { deadline in
      var failures: [String] = []
      while Date() < deadline {
        let result = try? Command.run(Command.appbox, ["purge", mountpoint, "--bytes", "512K"])
        if result?.status != 0 { failures.append("appbox purge: \(result?.error ?? "did not run")") }
      }
      return failures
    }
    let movers = (0..<4).map { index in
      { @Sendable (deadline: Date) -> [String] in
        Self.mover(mountpoint, index: index, purgeable: index % 2 == 0 ? "Library/Caches" : "tmp", until: deadline)
      }
    }
    let result = Churn.run(fixture, seconds: 8, reopeners: 0, fillers: 3, extra: movers + [purges])
    #expect(result.failures.isEmpty, "\(result.failures.prefix(10)) (\(result.failures.count) in all)")
    // Purges took files from the movers' directories too (thousands in a run of 8 s).
    #expect(try Quota.purgedPaths(mountpoint).contains { $0.contains("/m") }, "no purge took a mover's file")
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    let before = try DomainBooks.expectMatch(fixture)
    try fixture.remount()
    #expect(try DomainBooks.expectMatch(fixture) == before)
    try fixture.unmount()
  }

  static let filesPerRound = 16
  static let fileSize = 8192

  /// Moves its own directory `mN` between `purgeable` and Documents until `deadline`,
  /// refilling it while it is purgeable. Every file listed right after a move into
  /// Documents must still be there, with its contents, when it moves out again.
  static func mover(_ mountpoint: String, index: Int, purgeable: String, until deadline: Date) -> [String] {
    var failures: [String] = []
    let purgeablePath = "\(mountpoint)/\(purgeable)/m\(index)"
    let documentsPath = "\(mountpoint)/Documents/m\(index)"
    if mkdir(purgeablePath, 0o755) != 0 { return ["mkdir \(purgeablePath): \(String(cString: strerror(errno)))"] }
    var serial = 0
    var moves = 0
    while Date() < deadline {
      for _ in 0..<Self.filesPerRound {
        serial += 1
        let path = "\(purgeablePath)/f\(serial)"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
          if errno != ENOSPC { failures.append("open \(path): \(String(cString: strerror(errno)))") }
          continue
        }
        let data = pattern(Self.fileSize, seed: UInt64(serial))
        if data.withUnsafeBufferPointer({ write(fd, $0.baseAddress!, $0.count) }) < 0, errno != ENOSPC {
          failures.append("write \(path): \(String(cString: strerror(errno)))")
        }
        close(fd)
      }
      guard rename(purgeablePath, documentsPath) == 0 else {
        failures.append("rename into Documents: \(String(cString: strerror(errno)))")
        break
      }
      moves += 1
      let kept = ((try? directoryNames(documentsPath)) ?? []).filter {
        var info = stat()
        return stat(documentsPath + "/" + $0, &info) == 0 && info.st_size == Self.fileSize
      }
      usleep(UInt32.random(in: 0..<2_000))
      for name in kept {
        let contents = try? readFile(documentsPath + "/" + name)
        if contents != pattern(Self.fileSize, seed: UInt64(name.dropFirst()) ?? 0) {
          failures.append("Documents/m\(index)/\(name) lost or changed after its directory left \(purgeable)")
        }
      }
      guard rename(documentsPath, purgeablePath) == 0 else {
        failures.append("rename out of Documents: \(String(cString: strerror(errno)))")
        break
      }
      moves += 1
    }
    if moves < 4 { failures.append("mover \(index) moved only \(moves) times") }
    return failures
  }
}
