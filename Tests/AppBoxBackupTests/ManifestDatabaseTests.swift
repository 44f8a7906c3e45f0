import Posix
import Testing

@testable import AppBoxBackup

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Manifest.db: the Files table through SQLite")
struct ManifestDatabaseTests {
  static let id = String(repeating: "ab", count: 20)

  @Test(
    "rows written in one transaction read back by domain, path bytes exact, records by row id; nothing writes to a backup read"
  )
  func roundTrip() throws {
    let scratch = try Scratch()
    let database = try Manifests.create(scratch("Manifest.db"))
    let latin1: [UInt8] = Array("Documents/caf".utf8) + [0xE9]
    try database.insert(fileID: Self.id, domain: "AppDomain-com.x", relativePath: latin1, flags: 1, file: [1, 2, 3])
    try database.insert(
      fileID: "b" + Self.id.dropFirst(), domain: "AppDomain-com.x", relativePath: [], flags: 2, file: [])
    try database.insert(
      fileID: "c" + Self.id.dropFirst(), domain: "HomeDomain", relativePath: Array("x".utf8), flags: 1, file: [9])
    try database.commit()
    let reader = try Manifests.open(scratch("Manifest.db"))
    #expect(try reader.domains() == ["AppDomain-com.x", "HomeDomain"])
    let rows = try reader.entries(domain: "AppDomain-com.x").sorted { $0.rowID < $1.rowID }
    #expect(rows.count == 2)
    #expect(rows[0].relativePath == latin1 && rows[0].flags == 1 && rows[0].fileID == Self.id)
    #expect(try reader.record(rowID: rows[0].rowID) == [1, 2, 3])
    #expect(try reader.record(rowID: rows[1].rowID) == [])
    #expect(throws: ManifestDatabase.Failure.self) { try reader.record(rowID: 9999) }
    #expect(throws: ManifestDatabase.Failure.self) { try reader.execute("DELETE FROM Files") }
    #expect(try reader.entries(domain: "AppDomain-com.x").count == 2)
  }

  @Test("a record over the limit, a file that is no database and a table without row ids are errors")
  func badDatabases() throws {
    let scratch = try Scratch()
    let database = try Manifests.create(scratch("big.db"))
    try database.insert(
      fileID: Self.id, domain: "AppDomain-x", relativePath: Array("Documents/a".utf8), flags: 1,
      file: [UInt8](repeating: 7, count: ManifestDatabase.recordLimit + 1))
    try database.commit()
    let big = try Manifests.open(scratch("big.db"))
    let row = try #require(try big.entries(domain: "AppDomain-x").first)
    #expect(throws: ManifestDatabase.Failure.self) { try big.record(rowID: row.rowID) }

    try Scratch.write(scratch("junk.db"), Array("SQLite format 3\0garbage".utf8))
    #expect(throws: ManifestDatabase.Failure.self) {
      try Manifests.open(scratch("junk.db")).domains()
    }

    let odd = try Manifests.create(scratch("odd.db"))
    try odd.execute(
      "DROP TABLE Files; CREATE TABLE Files (fileID TEXT PRIMARY KEY, domain TEXT, relativePath TEXT, flags INTEGER, file BLOB) WITHOUT ROWID;"
    )
    try odd.commit()
    #expect(throws: ManifestDatabase.Failure.self) {
      try Manifests.open(scratch("odd.db")).entries(domain: "AppDomain-x")
    }
  }

  @Test("a database is read from the file opened, not its name: replaced after the open, the original is read")
  func readsTheFileOpened() throws {
    let scratch = try Scratch()
    for (name, domain) in [("Manifest.db", "AppDomain-com.original"), ("other.db", "AppDomain-com.other")] {
      let database = try Manifests.create(scratch(name))
      try database.insert(fileID: Self.id, domain: domain, relativePath: [], flags: 2, file: [])
      try database.commit()
    }
    let fd = try Sys.open(scratch("Manifest.db"), O_RDONLY)
    defer { Sys.close(fd) }
    try Sys.rename(scratch("other.db"), to: scratch("Manifest.db"))
    let reader = try ManifestDatabase(reading: fd, displayPath: scratch("Manifest.db"))
    #expect(try reader.domains() == ["AppDomain-com.original"])
    #expect(try Manifests.open(scratch("Manifest.db")).domains() == ["AppDomain-com.other"])
  }

  @Test("a new database is made 0600, and never over an existing name or through a symlink")
  func createdPrivately() throws {
    let scratch = try Scratch()
    _ = try Manifests.create(scratch("a.db"))
    #expect(try Scratch.status(scratch("a.db")).st_mode & 0o7777 == 0o600)
    #expect(throws: ManifestDatabase.Failure.self) { try Manifests.create(scratch("a.db")) }
    #expect(symlink(scratch("elsewhere.db"), scratch("link.db")) == 0)
    #expect(throws: ManifestDatabase.Failure.self) { try Manifests.create(scratch("link.db")) }
    #expect(try !Scratch.names(scratch.path).contains("elsewhere.db"))
  }
}
