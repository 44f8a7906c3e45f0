import CSQLite
import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// A backup's `Manifest.db`: the SQLite table `Files (fileID, domain, relativePath, flags,
/// file)` that iOS writes, one row per backed-up item.
///
/// SQLite never opens it by a path another user could redirect (``DescriptorVFS``): a
/// backup being written is named through its staging directory's descriptor, a backup's
/// database is read from the very file AppBox opened (without following a symlink) and
/// checked. A backup is written without a journal (`journal_mode=OFF`: a failed backup is
/// removed whole); a backup read is immutable to SQLite, and, being input, may run no
/// function with side effects.
///
/// Text columns are bound and read as raw bytes, so a relative path that is not UTF-8
/// keeps its exact bytes (SQLite does not check text encodings).
public final class ManifestDatabase {
  /// A failed SQLite call: what was being done and SQLite's message.
  public struct Failure: Error, CustomStringConvertible {
    /// What was being done, and SQLite's message.
    public let description: String
  }

  private let handle: OpaquePointer
  private var insertStatement: OpaquePointer?

  /// The schema iOS 10 and later write.
  static let schema = """
    CREATE TABLE Files (fileID TEXT PRIMARY KEY, domain TEXT, relativePath TEXT, flags INTEGER, file BLOB);
    CREATE INDEX FilesDomainIdx ON Files(domain);
    CREATE INDEX FilesRelativePathIdx ON Files(relativePath);
    CREATE INDEX FilesFlagsIdx ON Files(flags);
    CREATE TABLE Properties (key TEXT PRIMARY KEY, value BLOB);
    """

  /// The new file's status when it was made (``init(creating:in:displayPath:)``), to
  /// know it again.
  let created: stat?

  /// Makes the file `name` in the directory `directoryFD` (a directory of the user's own
  /// that nobody else can write in: a backup's staging directory), new, with mode 0600
  /// whatever the umask (SQLite would make it 0644 less the umask), then creates the
  /// schema in it and begins a transaction.
  /// - Parameter displayPath: the file's path in messages.
  init(creating name: String, in directoryFD: Int32, displayPath: String) throws(Failure) {
    do throws(Errno) {
      let fd = try Sys.openat(directoryFD, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
      defer { Sys.close(fd) }
      try Sys.fchmod(fd, 0o600)
      created = try Sys.fstat(fd)
    } catch {
      throw Failure(description: "cannot create \(displayPath): \(error)")
    }
    handle = try Self.open(
      DescriptorVFS.name(name, in: directoryFD), flags: SQLITE_OPEN_READWRITE, displayPath: displayPath)
    try execute("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;")
    try execute(Self.schema)
    try execute("BEGIN")
  }

  /// Opens the database in the regular file open as `fd` for reading (the caller keeps
  /// and closes `fd`; SQLite reads a duplicate).
  /// - Parameter displayPath: the file's path in messages.
  init(reading fd: Int32, displayPath: String) throws(Failure) {
    created = nil
    handle = try Self.open(DescriptorVFS.name(ofFile: fd), flags: SQLITE_OPEN_READONLY, displayPath: displayPath)
    try execute("PRAGMA trusted_schema=OFF; PRAGMA query_only=ON;")
  }

  private static func open(_ name: String, flags: Int32, displayPath: String) throws(Failure) -> OpaquePointer {
    guard let vfs = DescriptorVFS.name else {
      throw Failure(description: "cannot open \(displayPath): SQLite has no unix VFS")
    }
    var db: OpaquePointer?
    guard sqlite3_open_v2(name, &db, flags, vfs) == SQLITE_OK, let db else {
      let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
      sqlite3_close(db)
      throw Failure(description: "cannot open \(displayPath): \(message)")
    }
    return db
  }

  deinit {
    sqlite3_finalize(insertStatement)
    sqlite3_close(handle)
  }

  private var message: String { String(cString: sqlite3_errmsg(handle)) }

  /// Runs SQL without results.
  func execute(_ sql: String) throws(Failure) {
    guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else {
      throw Failure(description: "\(sql.prefix(40)): \(message)")
    }
  }

  /// Adds one row (inside the transaction ``init(creating:in:displayPath:)`` began).
  func insert(fileID: String, domain: String, relativePath: [UInt8], flags: Int64, file: [UInt8]) throws(Failure) {
    if insertStatement == nil {
      let sql = "INSERT INTO Files (fileID, domain, relativePath, flags, file) VALUES (?, ?, ?, ?, ?)"
      guard sqlite3_prepare_v2(handle, sql, -1, &insertStatement, nil) == SQLITE_OK else {
        throw Failure(description: "prepare insert: \(message)")
      }
    }
    guard relativePath.count <= Int(Int32.max), file.count <= Int(Int32.max) else {
      throw Failure(description: "insert \(fileID): a path or record too large for SQLite")
    }
    let statement = insertStatement
    sqlite3_reset(statement)
    sqlite3_bind_text(statement, 1, fileID, -1, csqlite_transient())
    sqlite3_bind_text(statement, 2, domain, -1, csqlite_transient())
    relativePath.withUnsafeBufferPointer { buffer in
      let bytes = UnsafeRawPointer(buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!).assumingMemoryBound(
        to: CChar.self)
      _ = sqlite3_bind_text(statement, 3, bytes, Int32(buffer.count), csqlite_transient())
    }
    sqlite3_bind_int64(statement, 4, flags)
    file.withUnsafeBytes { buffer in
      _ = sqlite3_bind_blob(
        statement, 5, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, Int32(buffer.count), csqlite_transient())
    }
    guard sqlite3_step(statement) == SQLITE_DONE else {
      throw Failure(description: "insert \(fileID): \(message)")
    }
  }

  /// Commits the rows written.
  func commit() throws(Failure) { try execute("COMMIT") }

  /// The distinct domains in `Files`.
  public func domains() throws(Failure) -> [String] {
    var result: [String] = []
    try query("SELECT DISTINCT domain FROM Files ORDER BY domain", bind: []) { statement in
      result.append(Self.text(statement, 0).map { String(decoding: $0, as: UTF8.self) } ?? "")
    }
    return result
  }

  /// The rows of `Files`, by domain.
  func rowCounts() throws(Failure) -> [String: Int64] {
    var counts: [String: Int64] = [:]
    try query("SELECT domain, COUNT(*) FROM Files GROUP BY domain", bind: []) { statement in
      let domain = Self.text(statement, 0).map { String(decoding: $0, as: UTF8.self) } ?? ""
      counts[domain, default: 0] += sqlite3_column_int64(statement, 1)
    }
    return counts
  }

  /// Every row of `domain` without its record (`file`), in no particular order.
  func entries(domain: String) throws(Failure) -> [RestorePlan.Row] {
    var result: [RestorePlan.Row] = []
    let sql = "SELECT rowid, fileID, relativePath, flags FROM Files WHERE domain = ?"
    try query(sql, bind: [domain]) { statement in
      result.append(
        RestorePlan.Row(
          rowID: sqlite3_column_int64(statement, 0),
          fileID: String(decoding: Self.text(statement, 1) ?? [], as: UTF8.self),
          relativePath: Self.text(statement, 2) ?? [], flags: sqlite3_column_int64(statement, 3)))
    }
    return result
  }

  /// The largest `file` record read (a real one is well under a kilobyte; attributes of
  /// at most 64 KiB each make it larger).
  static let recordLimit = 16 << 20

  /// The `file` column of the row `rowID`.
  /// - Throws: ``Failure`` when there is no such row or its record is larger than
  ///   ``recordLimit``.
  func record(rowID: Int64) throws(Failure) -> [UInt8] {
    var statement: OpaquePointer?
    guard sqlite3_prepare_v2(handle, "SELECT file FROM Files WHERE rowid = ?", -1, &statement, nil) == SQLITE_OK
    else {
      throw Failure(description: "not a backup's Manifest.db (\(message))")
    }
    defer { sqlite3_finalize(statement) }
    sqlite3_bind_int64(statement, 1, rowID)
    switch sqlite3_step(statement) {
    case SQLITE_ROW:
      let count = Int(sqlite3_column_bytes(statement, 0))
      guard count <= Self.recordLimit else {
        throw Failure(description: "a record of \(count) bytes, more than \(Self.recordLimit)")
      }
      guard let blob = sqlite3_column_blob(statement, 0) else { return [] }
      return Array(UnsafeRawBufferPointer(start: blob, count: count))
    case SQLITE_DONE: throw Failure(description: "row \(rowID) is gone")
    default: throw Failure(description: "reading Manifest.db: \(message)")
    }
  }

  private func query(_ sql: String, bind: [String], _ each: (OpaquePointer?) -> Void) throws(Failure) {
    var statement: OpaquePointer?
    guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK else {
      throw Failure(description: "not a backup's Manifest.db (\(message))")
    }
    defer { sqlite3_finalize(statement) }
    for (index, value) in bind.enumerated() {
      sqlite3_bind_text(statement, Int32(index + 1), value, -1, csqlite_transient())
    }
    while true {
      switch sqlite3_step(statement) {
      case SQLITE_ROW: each(statement)
      case SQLITE_DONE: return
      default: throw Failure(description: "reading Manifest.db: \(message)")
      }
    }
  }

  private static func text(_ statement: OpaquePointer?, _ column: Int32) -> [UInt8]? {
    guard let pointer = sqlite3_column_text(statement, column) else { return nil }
    return Array(UnsafeBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(statement, column))))
  }
}
