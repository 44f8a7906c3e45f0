// A cache cleaner, as an app runs one at launch: removes the files in Caches older than
// MAX-AGE seconds, then the least recently modified ones until the rest fit in MAX-BYTES.
//
//   appbox run -- appbox-example-cache-cleaner MAX-AGE MAX-BYTES
//
// Prints each file it removed (`expired=`, `trimmed=`, paths relative to Caches) and what
// is left (`kept=`, `bytes=`).
import AppBoxKit

func report(_ key: String, _ value: Any?) {
  FileHandle.standardOutput.write(Data("\(key)=\(value.map { "\($0)" } ?? "nil")\n".utf8))
}

struct CachedFile {
  let url: URL
  let name: String
  let modified: Date
  let size: Int
}

/// Every regular file under `caches`, oldest first.
func cachedFiles(in caches: URL) throws -> [CachedFile] {
  let keys: [URLResourceKey] = [.isRegularFileKey, .contentModificationDateKey, .fileSizeKey]
  guard let walk = FileManager.default.enumerator(at: caches, includingPropertiesForKeys: keys) else { return [] }
  var files: [CachedFile] = []
  let prefix = caches.standardizedFileURL.path + "/"
  for case let url as URL in walk {
    let values = try url.resourceValues(forKeys: Set(keys))
    guard values.isRegularFile == true else { continue }
    let path = url.standardizedFileURL.path
    files.append(
      CachedFile(
        url: url, name: path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path,
        modified: values.contentModificationDate ?? .distantPast, size: values.fileSize ?? 0))
  }
  return files.sorted { $0.modified < $1.modified }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let maxAge = Double(arguments[1]), let maxBytes = Int(arguments[2]) else {
  FileHandle.standardError.write(Data("usage: appbox-example-cache-cleaner MAX-AGE-SECONDS MAX-BYTES\n".utf8))
  exit(64)
}
do {
  let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0]
  let expiry = Date().addingTimeInterval(-maxAge)
  var kept: [CachedFile] = []
  for file in try cachedFiles(in: caches) {
    guard file.modified < expiry else {
      kept.append(file)
      continue
    }
    try FileManager.default.removeItem(at: file.url)
    report("expired", file.name)
  }
  var total = kept.reduce(0) { $0 + $1.size }
  while total > maxBytes, let oldest = kept.first {
    try FileManager.default.removeItem(at: oldest.url)
    report("trimmed", oldest.name)
    total -= oldest.size
    kept.removeFirst()
  }
  report("kept", kept.map(\.name).joined(separator: ","))
  report("bytes", total)
} catch {
  report("error", error)
  exit(1)
}
