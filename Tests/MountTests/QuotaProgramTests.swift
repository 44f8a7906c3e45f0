import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Real programs against purging: a stale directory listing, and SQLite under pressure.
@Suite("Programs under purging", .needsFUSE, .timeLimit(.minutes(10)))
struct QuotaProgramTests {
  @Test("a program holding a listing gets ENOENT for purged names, never stale content")
  func listingThenPurge() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "20M"])
    try FileManager.default.createDirectory(
      atPath: fixture.path("Library/Caches/img"), withIntermediateDirectories: true)
    for index in 0..<8 {
      try Quota.writeFile(fixture.path("Library/Caches/img/f\(index)"), count: 50_000, seed: UInt64(index))
    }
    #expect(Quota.waitForReleases(fixture))
    let script = """
      import json, os, subprocess, sys, errno
      appbox, mount = sys.argv[1], sys.argv[2]
      d = os.path.join(mount, "Library/Caches/img")
      names = sorted(os.listdir(d))
      # Warm the kernel's caches: entries, attributes and page cache.
      warm = {n: len(open(os.path.join(d, n), "rb").read()) for n in names}
      sizes = {n: os.stat(os.path.join(d, n)).st_size for n in names}
      out = subprocess.run([appbox, "purge", mount, "--domain", "caches", "--all"], capture_output=True, text=True)
      results = {}
      for n in names:
          p = os.path.join(d, n)
          try:
              data = open(p, "rb").read()
              results[n] = "read %d bytes" % len(data)
          except OSError as e:
              results[n] = errno.errorcode.get(e.errno, str(e.errno))
          try:
              os.stat(p)
              results[n] += "/stat ok"
          except OSError as e:
              results[n] += "/stat " + errno.errorcode.get(e.errno, str(e.errno))
      print(json.dumps({"names": names, "warm": warm, "purge": out.stdout.strip(), "results": results,
                        "after": sorted(os.listdir(d))}))
      """
    let result = try Command.run("python3", ["-c", script, Command.appbox, fixture.mountpoint])
    #expect(result.status == 0, "\(result.error)")
    let report = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any] ?? [:]
    let names = report["names"] as? [String] ?? []
    #expect(names.count == 8)
    #expect((report["purge"] as? String)?.hasPrefix("purged 8 files") == true, "\(report)")
    let results = report["results"] as? [String: String] ?? [:]
    for name in names { #expect(results[name] == "ENOENT/stat ENOENT", "\(name): \(results[name] ?? "?")") }
    #expect((report["after"] as? [String]) == [])
    try Quota.expectBooksMatch(fixture, capacity: 20 << 20)
    try fixture.unmount()
  }

  @Test("SQLite in Application Support grows while a loop fills Caches: purges happen, the database stays whole")
  func sqliteUnderPressure() throws {
    let capacity: Int64 = 16 << 20
    let fixture = try MountFixture(arguments: ["--unlocked", "--capacity", "16M"])
    let database = fixture.path("Library/Application Support/app.db")
    let rows = 60
    let script = """
      db="$1"; caches="$2"; rows="$3"
      sqlite3 "$db" "PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB NOT NULL, h TEXT NOT NULL);" >/dev/null
      for i in $(seq 1 "$rows"); do
        dd if=/dev/urandom of="$caches/fill-$i" bs=64K count=8 status=none
        sqlite3 "$db" "INSERT INTO t VALUES($i, randomblob(100000), 'row-$i');"
      done
      sqlite3 "$db" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
      """
    let run = try Command.run(
      "/bin/bash",
      ["-c", "set -euo pipefail; " + script, "fill", database, fixture.path("Library/Caches"), String(rows)])
    #expect(run.status == 0, "workload: \(run.error)")
    let check = try Command.run(
      "sqlite3",
      [
        database,
        "PRAGMA integrity_check; SELECT count(*), sum(id), sum(length(b)) FROM t; SELECT count(*) FROM t WHERE h = 'row-' || id;",
      ])
    #expect(check.status == 0, "\(check.error)")
    #expect(check.output == "ok\n\(rows)|\(rows * (rows + 1) / 2)|\(rows * 100_000)\n\(rows)\n", "\(check.output)")
    let status = try Quota.status(fixture.mountpoint)
    #expect(Quota.number(status, "purges") > 0)
    #expect(Quota.number(status, "noSpaceRefusals") == 0)
    #expect(Quota.number(status, "usage.applicationSupport") >= Int64(rows * 100_000))
    let left = try FileManager.default.contentsOfDirectory(atPath: fixture.path("Library/Caches")).count
    #expect(left < rows, "the cache shrank: \(left) of \(rows) fill files left")
    #expect(try Quota.purgedPaths(fixture.mountpoint).allSatisfy { $0.hasPrefix("Library/Caches/fill-") })
    #expect(Quota.waitForReleases(fixture))
    try Quota.expectBooksMatch(fixture, capacity: capacity)
    try fixture.unmount()
  }
}
