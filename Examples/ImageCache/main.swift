// A two-level image cache: memory, then files in Caches named by a hash of the URL, then
// the source (a local directory stands in for the network). The system may purge Caches
// at any time: a missing file costs a re-fetch, never an error.
//
//   appbox run -- appbox-example-image-cache SOURCE NAME...
//
// Prints, per image, where its first and second fetch came from and its size.
import AppBoxKit

func report(_ key: String, _ value: Any?) {
  FileHandle.standardOutput.write(Data("\(key)=\(value.map { "\($0)" } ?? "nil")\n".utf8))
}

final class ImageCache {
  private var memory: [URL: Data] = [:]
  private let folder = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0]
    .appendingPathComponent("images", isDirectory: true)

  /// Where the image came from (`memory`, `disk`, `fetched`), and its bytes.
  func image(at url: URL) throws -> (source: String, data: Data) {
    if let data = memory[url] { return ("memory", data) }
    let file = folder.appendingPathComponent(Self.key(url))
    if let data = try? Data(contentsOf: file) {  // a miss (never cached, or purged) is not an error
      memory[url] = data
      return ("disk", data)
    }
    let data = try Data(contentsOf: url)  // the "network"
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try data.write(to: file, options: .atomic)
    memory[url] = data
    return ("fetched", data)
  }

  /// FNV-1a of the URL, in hex: stable across runs (`Hasher` is seeded per process).
  static func key(_ url: URL) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in url.absoluteString.utf8 {
      hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
    }
    return String(hash, radix: 16)
  }
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let source = arguments.first else {
  FileHandle.standardError.write(Data("usage: appbox-example-image-cache SOURCE NAME...\n".utf8))
  exit(64)
}
do {
  let cache = ImageCache()
  for name in arguments.dropFirst() {
    let url = URL(fileURLWithPath: source).appendingPathComponent(name)
    let first = try cache.image(at: url)
    let second = try cache.image(at: url)
    report(name, "\(first.source),\(second.source),\(first.data.count)")
  }
} catch {
  report("error", error)
  exit(1)
}
