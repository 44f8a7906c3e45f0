// Micro benchmark for the event log's schema (AppBoxEvents): what encoding an event costs
// the daemon's event queue, and reading one costs a report, against the hand-written
// lines it replaced and against Foundation. Run in release mode:
// `swift run -c release event-encoding-bench [events]`.

import AppBoxEvents
import Foundation
import SandboxPolicy

/// This thread's CPU seconds taken by a block (CPU time, not wall time: the other
/// processes of a busy machine do not count; their cache traffic still does).
func seconds(_ body: () -> Void) -> Double {
  var start = timespec()
  var end = timespec()
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start)
  body()
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end)
  return Double(end.tv_sec - start.tv_sec) + Double(end.tv_nsec - start.tv_nsec) / 1e9
}

/// Runs the variants in turn, `rounds` times (so each round's variants share the
/// machine's state), and returns each one's median in nanoseconds per event.
func compare(_ count: Int, rounds: Int = 9, _ variants: [() -> Void]) -> [Double] {
  var runs = [[Double]](repeating: [], count: variants.count)
  for _ in 0..<rounds {
    for (index, variant) in variants.enumerated() { runs[index].append(seconds(variant) / Double(count) * 1e9) }
  }
  return runs.map { $0.sorted()[rounds / 2] }
}

// MARK: - The hand-written lines AppBox wrote before the schema (the baseline)

func handWritten(_ event: ProtectionEvent) -> String {
  var line = "{\"type\":\"refusal\",\"time\":" + JSONText.number(event.time)
  line += ",\"path\":" + JSONText.quoted(bytes: event.pathBytes)
  if !JSONText.isValidUTF8(event.pathBytes) { line += ",\"pathHex\":\"" + JSONText.hex(event.pathBytes) + "\"" }
  line += ",\"class\":" + JSONText.quoted(event.protectionClass.name)
  line += ",\"operation\":" + JSONText.quoted(event.operation.name)
  line += ",\"state\":" + JSONText.quoted(event.state.name) + "}"
  return line
}

func handWritten(_ event: PurgeEvent) -> String {
  var line = "{\"type\":\"purge\",\"time\":" + JSONText.number(event.time)
  line += ",\"path\":" + JSONText.quoted(bytes: event.pathBytes)
  if !JSONText.isValidUTF8(event.pathBytes) { line += ",\"pathHex\":\"" + JSONText.hex(event.pathBytes) + "\"" }
  line += ",\"bytes\":\(event.bytes)"
  line += ",\"domain\":" + JSONText.quoted(event.domain.machineName)
  line += ",\"reason\":" + JSONText.quoted(event.reason.rawValue)
  line += ",\"lastUse\":" + JSONText.number(event.lastUse) + "}"
  return line
}

func handWritten(_ event: UsageEvent) -> String {
  let sample = event.sample
  return "{\"type\":\"usage\",\"time\":" + JSONText.number(event.time)
    + ",\"used\":\(sample.used),\"capacity\":\(sample.capacity)"
    + ",\"caches\":\(sample.caches),\"tmp\":\(sample.tmp),\"purges\":\(sample.purges)"
    + ",\"bytesPurged\":\(sample.bytesPurged),\"noSpace\":\(sample.noSpace),\"state\":"
    + JSONText.quoted(event.state.name) + ",\"reason\":" + JSONText.quoted(event.reason.rawValue) + "}"
}

/// Foundation's encoder, for reference (the same members, its own number format).
struct FoundationRefusal: Codable {
  var type = "refusal"
  var time: Double
  var path: String
  var `class`: String
  var operation: String
  var state: String
}

// MARK: - Run

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 200_000 : 200_000
let refusals = (0..<count).map {
  ProtectionEvent(
    time: 1_796_017_592.125 + Double($0) * 1e-3, pathBytes: Array("Documents/secret/file-\($0).sqlite".utf8),
    protectionClass: .complete, operation: .openExisting, state: .locked)
}
let purges = (0..<count).map {
  PurgeEvent(
    time: 1_796_017_592.7 + Double($0) * 1e-3, pathBytes: Array("Library/Caches/images/thumb-\($0).jpg".utf8),
    bytes: 1_048_576, domain: .caches, reason: .pressure, lastUse: 1_796_017_590)
}
let samples = (0..<count).map {
  UsageEvent(
    time: 1_796_017_611 + Double($0),
    sample: UsageSample(
      used: 7_340_032 + Int64($0), capacity: 16_777_216, caches: 6_291_456, tmp: 0, purges: $0, bytesPurged: 3_600_000,
      noSpace: 2), state: .unlocked, reason: .interval)
}

var sink = 0
print("AppBoxEvents: \(count) events of each type; thread CPU time, median of 9 interleaved rounds, ns per event")
print("")
print("encode      hand-written  JSONLineEncoder  ratio  Foundation JSONEncoder  ratio")
func row(_ name: String, _ results: [Double]) {
  var text = name.padding(toLength: 12, withPad: " ", startingAt: 0)
  text += String(format: "%12.0f  %15.0f  %5.2f", results[0], results[1], results[1] / results[0])
  if results.count > 2 { text += String(format: "  %22.0f  %5.2f", results[2], results[2] / results[0]) }
  print(text)
}
let encoder = JSONEncoder()
row(
  "refusal",
  compare(
    count,
    [
      { for event in refusals { sink &+= handWritten(event).utf8.count } },
      { for event in refusals { sink &+= (try? AppBoxEvent.refusal(event).encoded())?.count ?? 0 } },
      {
        for event in refusals {
          let value = FoundationRefusal(
            time: event.time, path: event.path, class: event.protectionClass.name, operation: event.operation.name,
            state: event.state.name)
          sink &+= (try? encoder.encode(value))?.count ?? 0
        }
      },
    ]))
row(
  "purge",
  compare(
    count,
    [
      { for event in purges { sink &+= handWritten(event).utf8.count } },
      { for event in purges { sink &+= (try? AppBoxEvent.purge(event).encoded())?.count ?? 0 } },
    ]))
row(
  "usage",
  compare(
    count,
    [
      { for event in samples { sink &+= handWritten(event).utf8.count } },
      { for event in samples { sink &+= (try? AppBoxEvent.usage(event).encoded())?.count ?? 0 } },
    ]))

let lines =
  refusals.map { Array(handWritten($0).utf8) } + purges.map { Array(handWritten($0).utf8) }
  + samples.map { Array(handWritten($0).utf8) }
print("")
print("decode      JSONSerialization  JSONLineDecoder  ratio   (the three types, as a report reads them)")
let decoded = compare(
  lines.count,
  [
    {
      for line in lines {
        if let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] { sink &+= object.count }
      }
    },
    { for line in lines { if let event = try? AppBoxEvent.decode(line) { sink &+= event.typeName.count } } },
  ])
print(String(format: "            %17.0f  %15.0f  %5.2f", decoded[0], decoded[1], decoded[1] / decoded[0]))
print("")
print("(checksum \(sink))")
