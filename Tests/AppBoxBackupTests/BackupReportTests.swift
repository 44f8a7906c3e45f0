import SandboxPolicy
import Testing

@testable import AppBoxBackup

@Suite("The backup's size report")
struct BackupReportTests {
  static func components(_ path: String) -> [[UInt8]] { path.split(separator: "/").map { Array($0.utf8) } }

  @Test func reportTalliesAndKeepsTheLargest() {
    var report = BackupReport()
    for size in 1...20 {
      report.addIncluded(Self.components("Documents/f\(size)"), kind: .file, bytes: Int64(size * 100))
    }
    report.addIncluded(Self.components("Library/Preferences/p"), kind: .file, bytes: 7)
    report.addIncluded(Self.components("Documents/d"), kind: .directory, bytes: 0)
    report.addExcluded(Self.components("Documents/big"), by: .modern, files: 3, bytes: 5000)
    report.addNotBackedUp(.caches, files: 2, bytes: 10)
    #expect(report.included == .init(files: 21, bytes: 21_007))
    #expect(report.byDirectory[0].tally == .init(files: 20, bytes: 21_000))
    #expect(report.byDirectory[2].tally == .init(files: 1, bytes: 7))
    #expect(report.largest.count == BackupReport.largestCount)
    #expect(report.largest.first?.bytes == 2000)
    #expect(report.largest.last?.bytes == 1100)
    #expect(report.excluded == .init(files: 3, bytes: 5000))
    #expect(
      report.json(dryRun: true).contains(
        "\"excluded\":{\"files\":3,\"bytes\":5000,\"items\":[{\"path\":\"Documents/big\",\"bytes\":5000,\"by\":\"modern\"}]}"
      ))
    #expect(report.text(dryRun: true).hasPrefix("largest backed-up files:"))
  }

  @Test("sizes of sparse files add up past 2^63 without a trap: the sums stop at the largest value")
  func sumsSaturate() {
    var report = BackupReport()
    // As 600,000 sparse files of 16 TiB (ext4's largest) would.
    for index in 0..<3 {
      report.addIncluded([Array("Documents".utf8), Array("f\(index)".utf8)], kind: .file, bytes: .max / 2 + 1)
    }
    report.addNotBackedUp(.caches, files: 1, bytes: .max)
    report.addNotBackedUp(.caches, files: 1, bytes: .max)
    report.addExcluded(Self.components("Documents/x"), by: .legacy, files: 1, bytes: .max)
    report.addExcluded(Self.components("Documents/y"), by: .legacy, files: 1, bytes: 1)
    #expect(report.included.bytes == .max)
    #expect(report.byDirectory[0].tally.bytes == .max)
    #expect(report.caches.bytes == .max)
    #expect(report.excluded.bytes == .max)
    #expect(report.json(dryRun: false).contains("\"bytes\":9223372036854775807"))
    var sum: Int64 = .min
    sum.addSaturating(-1)
    #expect(sum == .min)
  }

  @Test("items too deep to restore are listed in the text and the JSON")
  func tooDeep() {
    var report = BackupReport()
    report.tooDeep.append(Array("Documents/a/b".utf8))
    #expect(report.text(dryRun: false).contains("error: nested too deep to restore, left out: Documents/a/b"))
    #expect(report.json(dryRun: false).hasSuffix("\"tooDeep\":[\"Documents/a/b\"]}"))
    #expect(BackupReport.maximumDepth == 2048)
  }
}
