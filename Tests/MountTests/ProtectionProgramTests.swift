import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Data Protection with a real program (sqlite3)", .needsFUSE, .timeLimit(.minutes(10)))
struct ProtectionProgramTests {
  func sqlite(_ database: String, _ sql: String) throws -> CommandResult {
    try Command.run("sqlite3", ["-batch", database, sql])
  }

  @Test("a class-A database fails while LOCKED and is intact after unlock; a class-C one keeps working")
  func sqliteDatabases() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    let secure = fixture.path("Library/Application Support/secure")
    let plain = fixture.path("Library/Application Support/plain")
    #expect(mkdir(secure, 0o755) == 0)
    #expect(mkdir(plain, 0o755) == 0)
    #expect(Sys2.setxattr(secure, ProtectionAttribute.protection, "complete") == 0)

    let setup = "create table t(x text); insert into t values ('one'), ('two'), ('three');"
    for directory in [secure, plain] {
      let created = try sqlite(directory + "/app.db", setup)
      try #require(created.status == 0, "sqlite3 create in \(directory): \(created.error)")
    }
    #expect(Sys2.protection(secure + "/app.db") == "complete", "the database inherits its directory's class")
    #expect(Sys2.protection(plain + "/app.db") == "completeUntilFirstUserAuthentication")

    try fixture.control("lock")
    try fixture.waitForState("LOCKED")

    let locked = try sqlite(secure + "/app.db", "select count(*) from t;")
    #expect(locked.status != 0, "sqlite3 read a class-A database while LOCKED: \(locked.output)")
    let message = locked.error.lowercased()
    #expect(
      message.contains("unable to open") || message.contains("i/o") || message.contains("not authorized")
        || message.contains("operation not permitted"),
      "sqlite3 said: \(locked.error)")
    #expect(!locked.output.contains("3"))
    let write = try sqlite(secure + "/app.db", "insert into t values ('four');")
    #expect(write.status != 0, "sqlite3 wrote to a class-A database while LOCKED")

    let working = try sqlite(plain + "/app.db", "insert into t values ('four'); select count(*) from t;")
    #expect(working.status == 0, "class C while LOCKED: \(working.error)")
    #expect(working.output.trimmingCharacters(in: .whitespacesAndNewlines) == "4")

    try fixture.control("unlock")
    let after = try sqlite(secure + "/app.db", "pragma integrity_check; select count(*) from t;")
    #expect(after.status == 0, "after unlock: \(after.error)")
    #expect(after.output.split(separator: "\n") == ["ok", "3"])
    let plainAfter = try sqlite(plain + "/app.db", "pragma integrity_check; select count(*) from t;")
    #expect(plainAfter.output.split(separator: "\n") == ["ok", "4"])
    try fixture.unmount()
  }

  @Test("a sqlite3 session that opened a class-A database before the lock gets errors while LOCKED")
  func sqliteSessionAcrossLock() throws {
    let fixture = try MountFixture(arguments: ["--unlocked", "--grace", "0"])
    let secure = fixture.path("Documents/secure")
    #expect(mkdir(secure, 0o755) == 0)
    #expect(Sys2.setxattr(secure, ProtectionAttribute.protection, "A") == 0)
    let created = try sqlite(secure + "/app.db", "create table t(x); insert into t values (1), (2);")
    try #require(created.status == 0, "\(created.error)")

    // One python process holds the database open across the lock.
    let script = """
      import sqlite3, sys
      db = sqlite3.connect(sys.argv[1], isolation_level=None)
      print(db.execute('select count(*) from t').fetchone()[0], flush=True)
      for line in sys.stdin:
          try:
              db.execute('insert into t values (3)')
              print('ok', db.execute('select count(*) from t').fetchone()[0], flush=True)
          except sqlite3.Error as error:
              print('error', error, flush=True)
      """
    let child = try InteractiveChild("/usr/bin/python3", ["-c", script, secure + "/app.db"])
    #expect(child.readLine() == "2")
    try fixture.control("lock")
    try fixture.waitForState("LOCKED")
    child.send("go")
    let locked = child.readLine() ?? "<no answer>"
    #expect(locked.hasPrefix("error"), "while LOCKED: \(locked)")
    try fixture.control("unlock")
    child.send("go")
    let unlocked = child.readLine() ?? "<no answer>"
    #expect(unlocked.hasPrefix("ok"), "after unlock: \(unlocked)")
    let stderr = child.wait()
    #expect(child.process.terminationStatus == 0, "\(stderr)")
    let check = try sqlite(secure + "/app.db", "pragma integrity_check;")
    #expect(check.output.trimmingCharacters(in: .whitespacesAndNewlines) == "ok")
    try fixture.unmount()
  }
}
