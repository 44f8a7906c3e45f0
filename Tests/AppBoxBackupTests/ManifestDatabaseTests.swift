import Posix
import Testing

@testable import AppBoxBackup

@Suite("Manifest.db: the Files table through SQLite")
struct ManifestDatabaseTests {
  static let id = String(repeating: "ab", count: 20)

  @Test(
    "rows written in one transaction read back by domain, path bytes exact, records by row id; nothing writes to a backup read"
  )
  func roundTrip() throws {
    let scratch = try Scratch()
    let database = try ManifestDatabase(path: scratch("Manifest.db"), create: true)
    let latin1: [UInt8] = Array("Documents/caf".utf8) + [0xE9]
    try database.insert(fileID: Self.id, domain: "AppDomain-com.x", relativePath: latin1, flags: 1, file: [1, 2, 3])
    try database.insert(
      fileID: "b" + Self.id.dropFirst(), domain: "AppDomain-com.x", relativePath: [], flags: 2, file: [])
    try database.insert(
      fileID: "c" + Self.id.dropFirst(), domain: "HomeDomain", relativePath: Array("x".utf8), flags: 1, file: [9])
    try database.commit()
    let reader = try ManifestDatabase(path: scratch("Manifest.db"), create: false)
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
    let database = try ManifestDatabase(path: scratch("big.db"), create: true)
    try database.insert(
      fileID: Self.id, domain: "AppDomain-x", relativePath: Array("Documents/a".utf8), flags: 1,
      file: [UInt8](repeating: 7, count: ManifestDatabase.recordLimit + 1))
    try database.commit()
    let big = try ManifestDatabase(path: scratch("big.db"), create: false)
    let row = try #require(try big.entries(domain: "AppDomain-x").first)
    #expect(throws: ManifestDatabase.Failure.self) { try big.record(rowID: row.rowID) }

    try Scratch.write(scratch("junk.db"), Array("SQLite format 3\0garbage".utf8))
    #expect(throws: ManifestDatabase.Failure.self) {
      try ManifestDatabase(path: scratch("junk.db"), create: false).domains()
    }

    let odd = try ManifestDatabase(path: scratch("odd.db"), create: true)
    try odd.execute(
      "DROP TABLE Files; CREATE TABLE Files (fileID TEXT PRIMARY KEY, domain TEXT, relativePath TEXT, flags INTEGER, file BLOB) WITHOUT ROWID;"
    )
    try odd.commit()
    #expect(throws: ManifestDatabase.Failure.self) {
      try ManifestDatabase(path: scratch("odd.db"), create: false).entries(domain: "AppDomain-x")
    }
  }
}
