// Micro benchmark for SandboxPolicy.PurgeCatalog at the scale AppBox is built for: a
// million files under Caches. Run in release mode: `swift run -c release
// purge-catalog-bench [files]`.

import SandboxPolicy
import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Resident set size of this process in bytes, from `/proc/self/statm` (0 if unreadable).
func residentBytes() -> Int {
  guard let file = fopen("/proc/self/statm", "r") else { return 0 }
  defer { fclose(file) }
  var buffer = [UInt8](repeating: 0, count: 256)
  let count = fread(&buffer, 1, buffer.count, file)
  // statm: "size resident shared text lib data dt", in pages.
  let fields = buffer[..<count].split(separator: UInt8(ascii: " "))
  guard fields.count > 1, let resident = Int(String(decoding: fields[1], as: UTF8.self)) else {
    return 0
  }
  return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Seconds taken by a block.
func seconds(_ body: () -> Void) -> Double {
  let clock = ContinuousClock()
  let elapsed = clock.measure(body)
  let (whole, attoseconds) = elapsed.components
  return Double(whole) + Double(attoseconds) / 1e18
}

/// Writes `value` as 7 decimal digits into `name` at `offset`.
func writeDigits(_ value: Int, into name: inout [UInt8], at offset: Int) {
  var remaining = value
  for index in stride(from: offset + 6, through: offset, by: -1) {
    name[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
    remaining /= 10
  }
}

let fileCount = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1])! : 1_000_000
let directoryCount = 1000
let victimCount = 100_000
let fileBytes: Int64 = 4096
let fileInoBase: UInt64 = 1_000_000
let format = { (value: Double) -> String in
  let scaled = Int((value * 1000).rounded())
  return "\(scaled / 1000).\(String(repeating: "0", count: 3 - String(scaled % 1000).count))\(scaled % 1000)"
}

print("PurgeCatalog benchmark: \(fileCount) files in \(directoryCount) directories")

// MARK: - Build, in last-use order (files created over time)

let rssBefore = residentBytes()
let catalog = PurgeCatalog()
var name = Array("cache-item-0000000.bin".utf8)  // 22 bytes
let buildSeconds = seconds {
  // 10 top-level directories with 99 subdirectories each: 1000 directories.
  var ino: UInt64 = 1
  var directories: [UInt64] = []
  for top in 0..<10 {
    let topIno = ino
    catalog.registerDirectory(ino: topIno, parent: .root(.caches), name: Array("group-\(top)".utf8))
    directories.append(topIno)
    ino += 1
    for sub in 0..<99 {
      catalog.registerDirectory(ino: ino, parent: .directory(topIno), name: Array("bucket-\(top)-\(sub)".utf8))
      directories.append(ino)
      ino += 1
    }
  }
  for index in 0..<fileCount {
    writeDigits(index, into: &name, at: 11)
    catalog.addFile(
      ino: fileInoBase + UInt64(index), parent: .directory(directories[index % directories.count]),
      name: name, bytes: fileBytes, lastUse: UInt32(1_700_000_000 + index / 100))
  }
}
let rssAfter = residentBytes()
print("build:                 \(format(buildSeconds)) s")
print("bytes per file (catalog storage): \(catalog.approximateMemoryBytes / catalog.count)")
print("bytes per file (RSS delta):       \((rssAfter - rssBefore) / catalog.count)")

// MARK: - Touches

var random = SeededGenerator(seed: 7)
let touchInos = (0..<1_000_000).map { _ in fileInoBase + UInt64.random(in: 0..<UInt64(fileCount), using: &random) }
var time = UInt32(1_800_000_000)
let touchSeconds = seconds {
  for ino in touchInos {
    catalog.touch(ino: ino, at: time)
    time &+= 1
  }
}
print("1,000,000 touches:     \(format(touchSeconds)) s (\(Int(touchSeconds * 1e9 / 1e6)) ns each)")

// MARK: - Choose and remove 100,000 victims

var victims: [PurgeCatalog.Victim] = []
let chooseSeconds = seconds { victims = catalog.chooseVictims(toFree: Int64(victimCount) * fileBytes) }
let removeSeconds = seconds {
  for victim in victims { catalog.removeFile(ino: victim.ino) }
}
precondition(victims.count == victimCount)
print("chooseVictims 100,000: \(format(chooseSeconds)) s")
print("remove 100,000:        \(format(removeSeconds)) s")
print("choose + remove:       \(format(chooseSeconds + removeSeconds)) s")
print("files left: \(catalog.count), purgeable \(ByteCount(catalog.totalPurgeableBytes).formatted)")

// MARK: - Path building for the purged files' events

var pathBytes = 0
let pathSeconds = seconds {
  for victim in victims.prefix(10_000) {
    pathBytes += catalog.path(ofDirectory: victim.parent.directoryInode!)!.count
  }
}
print("10,000 directory paths: \(format(pathSeconds)) s")

// MARK: - Bulk load with unordered times (mount-time index)

let bulk = PurgeCatalog()
bulk.reserveCapacity(files: fileCount, nameBytes: fileCount * name.count + 64 * 1024)
bulk.registerDirectory(ino: 1, parent: .root(.caches), name: Array("d".utf8))
let bulkSeconds = seconds {
  bulk.beginBulkLoad()
  for index in 0..<fileCount {
    writeDigits(index, into: &name, at: 11)
    bulk.addFile(
      ino: fileInoBase + UInt64(index), parent: .directory(1), name: name, bytes: fileBytes,
      lastUse: UInt32.random(in: 1_600_000_000...1_700_000_000, using: &random))
  }
  bulk.endBulkLoad()
}
print(
  "bulk load, random times, reserved: \(format(bulkSeconds)) s, "
    + "\(bulk.approximateMemoryBytes / bulk.count) bytes per file")
