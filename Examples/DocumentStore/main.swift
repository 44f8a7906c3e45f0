// A JSON document store in Application Support, written atomically with class `complete`,
// as an iOS app keeps its data: only `import AppBoxKit` differs from the device's code.
//
//   appbox run -- appbox-example-document-store TITLE...   adds a note per TITLE
//
// Prints what it saw as `key=value` lines (the tests read them).
import AppBoxKit

func report(_ key: String, _ value: Any?) {
  FileHandle.standardOutput.write(Data("\(key)=\(value.map { "\($0)" } ?? "nil")\n".utf8))
}

struct Note: Codable {
  var title: String
  var created: Date
}

/// The notes, in one JSON file replaced as a whole on every save.
struct NoteStore {
  let url: URL

  init() throws {
    let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
    try FileManager.default.createDirectory(at: support, withIntermediateDirectories: true)
    url = support.appendingPathComponent("notes.json")
  }

  func load() throws -> [Note] {
    guard FileManager.default.fileExists(atPath: url.path) else { return [] }
    return try JSONDecoder().decode([Note].self, from: Data(contentsOf: url))
  }

  /// Atomic: a reader sees the old file or the new one, never half of it.
  func save(_ notes: [Note]) throws {
    try JSONEncoder().encode(notes).write(to: url, options: [.atomic, .completeFileProtection])
  }
}

do {
  let fileManager = FileManager.default
  report("home", NSHomeDirectory())
  report("documents", fileManager.urls(for: .documentDirectory, in: .userDomainMask)[0].path)
  report("support", fileManager.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0].path)
  report("caches", fileManager.urls(for: .cachesDirectory, in: .userDomainMask)[0].path)
  report("library", fileManager.urls(for: .libraryDirectory, in: .userDomainMask).first?.path)
  report("tmp", fileManager.temporaryDirectory.path)

  let store = try NoteStore()
  var notes = try store.load()
  for title in CommandLine.arguments.dropFirst() { notes.append(Note(title: title, created: Date())) }
  try store.save(notes)
  report("notes", try store.load().map(\.title).joined(separator: ","))
  report("protection", try fileManager.attributesOfItem(atPath: store.url.path)[.protectionKey])
  report("excluded", try store.url.resourceValues(forKeys: [.isExcludedFromBackupKey]).isExcludedFromBackup)

  UserDefaults.standard.set(notes.count, forKey: "noteCount")
  report("defaultsSynchronized", UserDefaults.standard.synchronize())
} catch {
  report("error", error)
  exit(1)
}
