// A downloads folder in Application Support, excluded from backup (the data can be
// downloaded again), as Apple's guidelines ask: the folder carries the flag, and what is
// downloaded into it is excluded through it.
//
//   appbox run -- appbox-example-downloads NAME BYTES
//
// Saves NAME (BYTES zero bytes) as if downloaded, and prints what is excluded.
import AppBoxKit

func report(_ key: String, _ value: Any?) {
  FileHandle.standardOutput.write(Data("\(key)=\(value.map { "\($0)" } ?? "nil")\n".utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let size = Int(arguments[2]), size >= 0 else {
  FileHandle.standardError.write(Data("usage: appbox-example-downloads NAME BYTES\n".utf8))
  exit(64)
}
do {
  let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
  var downloads = support.appendingPathComponent("Downloads", isDirectory: true)
  try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
  var values = URLResourceValues()
  values.isExcludedFromBackup = true
  try downloads.setResourceValues(values)

  let file = downloads.appendingPathComponent(arguments[1])
  try Data(count: size).write(to: file, options: .atomic)

  let excluded: Set<URLResourceKey> = [.isExcludedFromBackupKey]
  report("downloads.excluded", try downloads.resourceValues(forKeys: excluded).isExcludedFromBackup)
  report("file.excluded", try file.resourceValues(forKeys: excluded).isExcludedFromBackup)
  report("support.excluded", try support.resourceValues(forKeys: excluded).isExcludedFromBackup)
} catch {
  report("error", error)
  exit(1)
}
