import AppBoxEvents
import Foundation
import SandboxPolicy
import TestSupport

/// Hostile event lines for the report: mutations of the daemon's lines (extreme numbers,
/// flipped and cut bytes), deterministic.
enum ReportFuzz {
  static func hostileLines(count: Int, seed: UInt64 = 0xFEED) -> [[UInt8]] {
    var random = SeededGenerator(seed: seed)
    let valid = ReportFixtures.log.split(separator: "\n").map { Array($0.utf8) }
    let numbers = [
      "1e300", "-1e308", "1e308", "1e309", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
      "0", "-1", "1e12", "-1e12", "999999999999", "4.9e-324", "1.5",
    ]
    var lines: [[UInt8]] = []
    for _ in 0..<count {
      var line = valid.randomElement(using: &random)!
      switch Int.random(in: 0..<5, using: &random) {
      case 0:
        line[Int.random(in: 0..<line.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
      case 1:
        line = Array(line.prefix(Int.random(in: 0..<line.count, using: &random)))
      case 2, 3:
        var text = String(decoding: line, as: UTF8.self)
        for key in [
          "time", "used", "capacity", "bytes", "from", "to", "count", "noSpace", "purgedBytes", "secondsSincePurge",
          "lastUse", "purges", "bytesPurged", "caches", "tmp",
        ] where Bool.random(using: &random) {
          if let range = text.range(of: "\"\(key)\":") {
            let end = text[range.upperBound...].firstIndex { $0 == "," || $0 == "}" } ?? text.endIndex
            text.replaceSubrange(range.upperBound..<end, with: numbers.randomElement(using: &random)!)
          }
        }
        line = Array(text.utf8)
      default:
        break
      }
      lines.append(line.filter { $0 != 0x0A })
    }
    return lines
  }
}
