import AppBoxEvents
import Foundation
import SandboxPolicy
import TestSupport
import Testing

@Suite("Event log reader")
struct EventLogReaderTests {
  func read(_ text: String) -> EventLogReader {
    var reader = EventLogReader()
    reader.read(Array(text.utf8))
    return reader
  }

  @Test("unknown types are skipped and counted by type; unknown members are ignored")
  func unknown() {
    let reader = read(
      """
      {"type":"log","version":1,"mount":"a","time":1,"segment":0}
      {"type":"future","time":3,"x":1}
      {"type":"future","time":4}
      {"type":"quota-warning","time":5}
      {"type":"state","time":2,"from":"UNLOCKED","to":"GRACE","why":"a newer daemon's member"}
      """)
    #expect(reader.skippedTypes == ["future": 2, "quota-warning": 1])
    #expect(reader.skippedLines == 3 && reader.malformedLines == 0)
    #expect(reader.events == [.state(DeviceStateEvent(time: 2, from: .unlocked, to: .grace))])
    #expect(reader.mounts == ["a"])
  }

  @Test("bad lines are counted and skipped; a cut last line is malformed; blank lines are nothing")
  func badLines() {
    let reader = read(
      """
      not json
      {"type":"purge","time":1}
      []

      \t
      {"time":2}
      {"type":7,"time":2}
      {"type":"state","time":"noon","from":"UNLOCKED","to":"LOCKED"}
      {"type":"state","time":1,"from":"UNLOCKED","to":"ASLEEP"}
      {"type":"usage","time":5,"used":1,"capacity":2}
      {"type":"refusal","time":1,"path":"a","class":"complete","operation":"openExisting","state":"LOCKED","count":0}
      {"type":"purge","time":6,"path":"tmp/a","bytes":1,"domain":"tmp","reason":"pressure","lastUse":1,"pathHex":"zz"}
      {"type":"state","time":1e300,"from":"UNLOCKED","to":"LOCKED"}
      {"type":"state","time":-1e308,"from":"UNLOCKED","to":"LOCKED"}
      {"type":"capacity","time":1,"from":1e300,"to":2,"reason":"resize"}
      {"type":"purge","time":6,"path":"tmp/a","bytes":1,"dom
      """)
    #expect(reader.events.isEmpty)
    #expect(reader.malformedLines == 14)
  }

  @Test("what the daemon writes reads back: Int64.max capacity, pathHex, coalesced counts")
  func daemonValues() {
    let reader = read(
      """
      {"type":"capacity","time":1796017600.2,"from":20971520,"to":9223372036854775807,"reason":"resize"}
      {"type":"usage","time":1796017600.3,"used":8192,"capacity":9223372036854775807,"caches":0,"tmp":0,"purges":0,"bytesPurged":0,"noSpace":0,"state":"UNLOCKED","reason":"capacity"}
      {"type":"refusal","time":1,"path":"D/\u{FFFD}","pathHex":"442fff","class":"complete","operation":"openExisting","state":"LOCKED","count":49999,"last":2.5}
      """)
    #expect(reader.malformedLines == 0 && reader.events.count == 3)
    guard case .refusal(let refusal) = reader.events[2] else {
      Issue.record("\(reader.events)")
      return
    }
    #expect(refusal.pathBytes == [0x44, 0x2F, 0xFF] && refusal.count == 49999 && refusal.last == 2.5)
  }

  @Test("a header of a newer version: what follows it is not read, until a header this version reads")
  func newerVersion() {
    let reader = read(
      """
      {"type":"log","version":1,"mount":"a","time":1,"segment":0}
      {"type":"state","time":2,"from":"UNLOCKED","to":"GRACE"}
      {"type":"log","version":2,"mount":{"id":"b"},"segment":"first"}
      {"type":"state","time":3,"from":"GRACE","to":"LOCKED"}
      {"type":"state","meaning":"changed"}
      {"type":"log","version":1,"mount":"c","time":4,"segment":0}
      {"type":"state","time":5,"from":"LOCKED","to":"UNLOCKED"}
      """)
    #expect(reader.newerVersion == 2)
    #expect(reader.unreadLines == 2 && reader.malformedLines == 0)
    #expect(reader.events.map(\.time) == [2, 5])
    #expect(reader.mounts == ["a", "c"])
  }

  @Test("a log from before headers reads as version 1")
  func noHeader() {
    let reader = read(#"{"type":"state","time":2,"from":"UNLOCKED","to":"GRACE"}"#)
    #expect(reader.newerVersion == nil && reader.events.count == 1 && reader.headers.isEmpty)
  }

  @Test("events not in the log: the earliest header read of each mount tells")
  func dropped() {
    let reader = read(
      """
      {"type":"log","version":1,"mount":"a","time":1,"segment":2,"eventsBefore":10}
      {"type":"rotate","time":2,"mount":"a","nextSegment":3}
      {"type":"log","version":1,"mount":"a","time":2,"segment":3,"eventsBefore":25}
      {"type":"log","version":1,"mount":"b","time":3,"segment":0}
      """)
    #expect(reader.droppedEvents == 10)
    #expect(reader.events.isEmpty)
  }

  @Test("events sort by time, ties in the log's order")
  func order() {
    let reader = read(
      """
      {"type":"state","time":5,"from":"UNLOCKED","to":"GRACE"}
      {"type":"state","time":1,"from":"BFU","to":"UNLOCKED"}
      {"type":"state","time":5,"from":"GRACE","to":"LOCKED"}
      """)
    #expect(
      reader.eventsInTimeOrder == [
        .state(DeviceStateEvent(time: 1, from: .bfu, to: .unlocked)),
        .state(DeviceStateEvent(time: 5, from: .unlocked, to: .grace)),
        .state(DeviceStateEvent(time: 5, from: .grace, to: .locked)),
      ])
  }

  /// Lines no daemon writes: mutations of real lines, extreme numbers, random bytes, deep
  /// nesting, huge strings.
  static func hostileLines(count: Int, seed: UInt64) -> [[UInt8]] {
    var random = SeededGenerator(seed: seed)
    let valid = EventRoundTripTests.samples.map { event in
      do { return try event.encoded() } catch { return [] }  // never: the round-trip test encodes every sample
    }
    let numbers = [
      "1e300", "-1e308", "1e309", "1.7976931348623157e308", "9223372036854775807", "9223372036854775808",
      "-9223372036854775809", "18446744073709551616", "0.0000000000000000000001", "-0", "1E+400", "4.9e-324",
      String(repeating: "9", count: 400), "123456789.123456789e-30",
    ]
    var lines: [[UInt8]] = []
    for _ in 0..<count {
      var line = valid.randomElement(using: &random)!
      switch Int.random(in: 0..<9, using: &random) {
      case 0:  // flip bytes
        for _ in 0..<Int.random(in: 1...4, using: &random) {
          line[Int.random(in: 0..<line.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
        }
      case 1:  // cut
        line = Array(line.prefix(Int.random(in: 0..<line.count, using: &random)))
      case 2:  // every number replaced by an extreme one
        var text = String(decoding: line, as: UTF8.self)
        for key in [
          "time", "used", "capacity", "bytes", "from", "to", "count", "last", "noSpace", "purgedBytes",
          "secondsSincePurge", "lastUse", "version", "segment", "eventsBefore",
        ] {
          if let range = text.range(of: "\"\(key)\":") {
            let end = text[range.upperBound...].firstIndex { $0 == "," || $0 == "}" } ?? text.endIndex
            text.replaceSubrange(range.upperBound..<end, with: numbers.randomElement(using: &random)!)
          }
        }
        line = Array(text.utf8)
      case 3:  // random bytes
        line = (0..<Int.random(in: 0...200, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
      case 4:  // deep nesting in a member
        let depth = Int.random(in: 1...20_000, using: &random)
        line =
          Array(("{\"type\":\"state\",\"x\":" + String(repeating: "[", count: depth)).utf8)
          + (Bool.random(using: &random) ? Array(String(repeating: "]", count: depth).utf8) + [0x7D] : [])
      case 5:  // a huge string
        line =
          Array(#"{"type":"refusal","path":""#.utf8) + [UInt8](repeating: 0x61, count: 1 << 16) + Array(#""}"#.utf8)
      case 6:  // insert JSON punctuation
        for _ in 0..<Int.random(in: 1...3, using: &random) {
          line.insert(
            Array("{}[],:\"\\".utf8).randomElement(using: &random)!, at: Int.random(in: 0...line.count, using: &random))
        }
      case 7:  // a type renamed, or a header of another version
        var text = String(decoding: line, as: UTF8.self)
        text = text.replacingOccurrences(
          of: "\"version\":1", with: "\"version\":\(Int.random(in: -5...5, using: &random))")
        if Bool.random(using: &random), let range = text.range(of: "\"type\":\"") {
          text.insert(contentsOf: "x", at: range.upperBound)
        }
        line = Array(text.utf8)
      default:  // unchanged: some lines stay valid
        break
      }
      lines.append(line.filter { $0 != 0x0A })
    }
    return lines
  }

  @Test("20,000 hostile lines: no crash, and every line is an event, structure, skipped, unread or malformed")
  func fuzz() {
    let lines = Self.hostileLines(count: 20_000, seed: 0x5EED)
    var reader = EventLogReader()
    for line in lines { reader.read(line: line) }
    let blank = lines.filter { $0.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D } }.count
    #expect(
      reader.events.count + reader.structureLines + reader.skippedLines + reader.malformedLines + reader.unreadLines
        + blank == lines.count)
    #expect(reader.malformedLines > 1000 && reader.events.count > 1000)
    for event in reader.events { #expect(EventSeconds.isValid(event.time)) }
  }
}
