import Foundation
import Posix
import SandboxPolicy
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The example programs (Examples/, one executable each, written as for iOS with
/// `import AppBoxKit`), each run under `appbox run` on a real mount and checked from
/// outside, as a device would show it.
@Suite("example programs", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct ExampleProgramTests {
  /// Runs `appbox run [OPTIONS] -- appbox-example-NAME ARGUMENTS`.
  static func run(_ options: [String], _ name: String, _ arguments: [String] = []) throws -> (
    status: Int32, seen: [String: String], result: CommandResult
  ) {
    let result = try Command.run(
      Command.appbox, ["run"] + options + ["--", RunCommandTests.example(name)] + arguments)
    return (result.status, RunCommandTests.lines(result.output), result)
  }

  @Test("document store: notes.json in Application Support, written atomically with class complete, kept across runs")
  func documentStore() throws {
    let directories = try SandboxDirectories()
    let first = try Self.run(["--backing", directories.backing], "document-store", ["first", "second"])
    #expect(first.status == 0, "\(first.result.error)\(first.result.output)")
    let root = try #require(first.seen["home"])
    #expect(root.hasPrefix("/tmp/appbox-run-") && root.hasSuffix("/container"))
    #expect(first.seen["documents"] == root + "/Documents")
    #expect(first.seen["support"] == root + "/Library/Application Support")
    #expect(first.seen["caches"] == root + "/Library/Caches")
    #expect(first.seen["library"] == root + "/Library")
    #expect(first.seen["tmp"] == root + "/tmp")
    #expect(first.seen["notes"] == "first,second")
    #expect(first.seen["protection"] == #"FileProtectionType(rawValue: "NSFileProtectionComplete")"#)
    #expect(first.seen["excluded"] == "false")
    #expect(!MountFixture.isMounted(root), "unmounted after the run")

    let second = try Self.run(["--backing", directories.backing], "document-store", ["third"])
    #expect(second.seen["notes"] == "first,second,third", "\(second.result.error)")
    let store = directories.backing + "/Library/Application Support/notes.json"
    let notes = try JSONSerialization.jsonObject(with: Data(try readFile(store))) as? [[String: Any]]
    #expect(notes?.compactMap { $0["title"] as? String } == ["first", "second", "third"])
    #expect(try getXattr(store, "user.appbox.protection") == bytes("complete"))
    #expect(try backingXattrNames(store).allSatisfy { !$0.contains("com.apple") }, "not excluded from backup")
    // Atomic writes left no temporary file; UserDefaults landed in Library/Preferences.
    #expect(try directoryNames(directories.backing + "/Library/Application Support") == ["notes.json"])
    #expect(
      FileManager.default.fileExists(
        atPath: directories.backing + "/Library/Preferences/appbox-example-document-store.plist"))
  }

  @Test("image cache: memory, then disk in Caches, and after a purge of Caches a re-fetch instead of a failure")
  func imageCacheSurvivesPurge() throws {
    let fixture = try MountFixture.unlocked()
    let source = fixture.root + "/source"
    try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: false)
    try writeFile(source + "/a.png", pattern(3000, seed: 1))
    try writeFile(source + "/b.png", pattern(5000, seed: 2))
    func run() throws -> [String: String] {
      let run = try Self.run([fixture.mountpoint], "image-cache", [source, "a.png", "b.png"])
      #expect(run.status == 0, "\(run.result.error)\(run.result.output)")
      return run.seen
    }
    #expect(try run() == ["a.png": "fetched,memory,3000", "b.png": "fetched,memory,5000"])
    #expect(try run() == ["a.png": "disk,memory,3000", "b.png": "disk,memory,5000"])
    #expect(try directoryNames(fixture.backingPath("Library/Caches/images")).count == 2)
    // The program's closes reach the daemon as releases a moment later (the kernel sends
    // them asynchronously), and an open file is never purged: purge until they came.
    #expect(
      fixture.waitUntil {
        let purge = try? Command.run(Command.appbox, ["purge", fixture.mountpoint, "--domain", "caches", "--all"])
        return purge?.status == 0
          && (try? directoryNames(fixture.backingPath("Library/Caches/images")).isEmpty) == true
      })
    #expect(try run() == ["a.png": "fetched,memory,3000", "b.png": "fetched,memory,5000"])
    #expect(try directoryNames(fixture.backingPath("Library/Caches/images")).count == 2, "cached again")
    try fixture.unmount()
  }

  @Test("cache cleaner: expired files go first, then the least recently modified until the rest fit")
  func cacheCleaner() throws {
    let fixture = try MountFixture.unlocked()
    let caches = fixture.path("Library/Caches")
    try FileManager.default.createDirectory(atPath: caches + "/sub", withIntermediateDirectories: true)
    let now = Date().timeIntervalSince1970
    // name, age in seconds; 4000 bytes each.
    for (name, age) in [("old.dat", 2 * 86400.0), ("a.dat", 300), ("b.dat", 200), ("c.dat", 100), ("sub/d.dat", 50)] {
      try writeFile(caches + "/" + name, pattern(4000, seed: 3))
      var times = [timespec](repeating: timespec(tv_sec: Int(now - age), tv_nsec: 0), count: 2)
      _ = try check(utimensat(AT_FDCWD, caches + "/" + name, &times, 0), "utimensat \(name)")
    }
    let run = try Self.run([fixture.mountpoint], "cache-cleaner", ["86400", "9000"])
    #expect(run.status == 0, "\(run.result.error)")
    #expect(run.result.output == "expired=old.dat\ntrimmed=a.dat\ntrimmed=b.dat\nkept=c.dat,sub/d.dat\nbytes=8000\n")
    #expect(try directoryNames(fixture.backingPath("Library/Caches")) == ["c.dat", "sub"])
    #expect(try directoryNames(fixture.backingPath("Library/Caches/sub")) == ["d.dat"])
    // Within both limits it removes nothing.
    let again = try Self.run([fixture.mountpoint], "cache-cleaner", ["86400", "9000"])
    #expect(again.result.output == "kept=c.dat,sub/d.dat\nbytes=8000\n")
    try fixture.unmount()
  }

  @Test("downloads folder: created in Application Support and excluded with Apple's attribute, its files through it")
  func downloads() throws {
    let fixture = try MountFixture.unlocked()
    let run = try Self.run([fixture.mountpoint], "downloads", ["episode-1.mp3", "10000"])
    #expect(run.status == 0, "\(run.result.error)")
    #expect(run.seen == ["downloads.excluded": "true", "file.excluded": "true", "support.excluded": "false"])
    let folder = fixture.backingPath("Library/Application Support/Downloads")
    #expect(try getXattr(folder, "user.appbox.x." + BackupExclusion.attributeName) == BackupExclusion.appleValue)
    #expect(try statPath(folder + "/episode-1.mp3").st_size == 10000)
    #expect(try backingXattrNames(folder + "/episode-1.mp3").isEmpty, "excluded through its folder")
    // A backup leaves the folder out, as a device's does.
    let backup = try Command.run(Command.appbox, ["backup", "--dry-run", "--json", fixture.mountpoint])
    #expect(backup.status == 0, "\(backup.error)")
    #expect(!backup.output.contains("episode-1.mp3"))
    try fixture.unmount()
  }

  @Test("capacity check: a write that fits is made; one that does not is declined by the check, not by ENOSPC")
  func capacityCheck() throws {
    let fixture = try MountFixture.unlocked(["--capacity", "8M"])
    let fits = try Self.run([fixture.mountpoint], "capacity-check", ["3000000"])
    #expect(fits.seen["write"] == "done", "\(fits.result.error)\(fits.result.output)")
    let important = try #require(fits.seen["important"].flatMap { Int64($0) })
    #expect(important > 3_000_000 && important <= 8 << 20)
    let large = try Self.run([fixture.mountpoint], "capacity-check", ["30000000"])
    #expect(large.status == 0)
    let available = try #require(large.seen["important"].flatMap { Int64($0) })
    #expect(large.seen["write"] == "declined: needs 30000000 bytes, \(available) available")
    #expect(try statPath(fixture.backingPath("Documents/large.bin")).st_size == 3_000_000, "left as it was")
    #expect(Quota.number(try Quota.status(fixture.mountpoint), "noSpaceRefusals") == 0, "no ENOSPC")
    try fixture.unmount()
  }
}

extension ExampleProgramTests {
  @Test(
    "protected secret: will-become-unavailable before class A closes, then EPERM, class C work while locked, did-become-available after the unlock"
  )
  func protectedSecret() throws {
    let fixture = try MountFixture.unlocked(["--grace", "1s"])
    let output = fixture.root + "/output"
    try writeFile(output, [])
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Command.appbox)
    process.arguments = ["run", fixture.mountpoint, "--", RunCommandTests.example("protected-secret")]
    process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
    try process.run()
    func seen() -> String { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }
    #expect(fixture.waitUntil(seconds: 30) { seen().contains("ready=true") }, "\(seen())")
    #expect(try Command.run(Command.appbox, ["lock", fixture.mountpoint]).status == 0)
    #expect(fixture.waitUntil(seconds: 30) { seen().contains("locked.c.write=") }, "\(seen())")
    #expect(try Command.run(Command.appbox, ["unlock", fixture.mountpoint]).status == 0)
    try RunCommandTests.waitForExit(process)
    #expect(process.terminationStatus == 0)
    let lines = seen().split(separator: "\n").map(String.init)
    #expect(
      lines.filter { !$0.hasPrefix("willAt=") } == [
        "source=eventLog", "ready=true", "event=willBecomeUnavailable", "locked.read=257 1",
        "locked.c.write=still working", "event=didBecomeAvailable", "unlocked.read=s3cret",
      ])
    // In time: after the lock, before class A closed (GRACE → LOCKED) and so before the
    // refusal of the secret.
    let willAt = try #require(RunCommandTests.lines(seen())["willAt"].flatMap(Double.init))
    let states = try Experiment.events(fixture.mountpoint, type: "state", atLeast: 3)
    let locked = try #require(states.first { $0["to"] as? String == "LOCKED" })
    let grace = try #require(states.first { $0["to"] as? String == "GRACE" })
    #expect(Experiment.number(grace, "time") <= willAt)
    #expect(willAt < Experiment.number(locked, "time"))
    let refusal = try #require(try Experiment.events(fixture.mountpoint, type: "refusal").first)
    #expect(refusal["path"] as? String == "Library/Application Support/secret")
    #expect(willAt < Experiment.number(refusal, "time"))
    try fixture.unmount()
  }

  @Test("protected secret --lock-myself: AppBoxDevice locks and unlocks with --allow-device-control, else 77")
  func protectedSecretLocksItself() throws {
    let allowed = try Self.run(
      ["--grace", "1s", "--allow-device-control"], "protected-secret", ["--lock-myself"])
    #expect(allowed.status == 0, "\(allowed.result.error)")
    #expect(allowed.seen["event"] == "didBecomeAvailable")
    #expect(allowed.seen["locked.read"] == "257 1")
    #expect(allowed.seen["unlocked.read"] == "s3cret")

    let refused = try Self.run(["--grace", "1s"], "protected-secret", ["--lock-myself"])
    #expect(refused.status == 77)
    #expect(
      refused.seen["control"]
        == "refused: device control is off: start the program with appbox run --allow-device-control")

    // The environment is no barrier: a program that names appbox itself is refused by the
    // daemon, and the device stays unlocked.
    let fixture = try MountFixture.unlocked(["--grace", "1s"])
    let forged = try Command.run(
      Command.appbox,
      [
        "run", fixture.mountpoint, "--", "/usr/bin/env", "APPBOX_DEVICE_CONTROL=" + Command.appbox,
        RunCommandTests.example("protected-secret"), "--lock-myself",
      ])
    #expect(forged.status == 77)
    let message = RunCommandTests.lines(forged.output)["control"] ?? ""
    #expect(
      message.hasPrefix("refused: appbox exited 77: ") && message.contains("--allow-device-control"), "\(message)")
    #expect(fixture.deviceState == "UNLOCKED")
    try fixture.unmount()
  }
}
