// Checks the capacity available for important data before a large write, and declines
// gracefully when it does not fit, instead of failing halfway with ENOSPC.
//
//   appbox run -- appbox-example-capacity-check BYTES
//
// Writes Documents/large.bin of BYTES bytes, or prints why it did not.
import AppBoxKit

func report(_ key: String, _ value: Any?) {
  FileHandle.standardOutput.write(Data("\(key)=\(value.map { "\($0)" } ?? "nil")\n".utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 2, let needed = Int64(arguments[1]), needed >= 0 else {
  FileHandle.standardError.write(Data("usage: appbox-example-capacity-check BYTES\n".utf8))
  exit(64)
}
do {
  let documents = FileManager.default.urls(for: .documentDirectory, in: .userDomainMask)[0]
  let values = try documents.resourceValues(forKeys: [.volumeAvailableCapacityForImportantUsageKey])
  let available = values.volumeAvailableCapacityForImportantUsage ?? 0
  report("important", available)
  guard needed <= available else {
    report("write", "declined: needs \(needed) bytes, \(available) available")
    exit(0)
  }
  try Data(count: Int(needed)).write(to: documents.appendingPathComponent("large.bin"))
  report("write", "done")
} catch {
  report("error", error)
  exit(1)
}
