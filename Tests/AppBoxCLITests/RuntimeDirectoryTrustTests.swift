import AppBoxEvents
import Foundation
import Posix
import Testing

@testable import AppBoxCLI
@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A temporary directory of root's (0755) in `/tmp`, for trees of directories of other
/// users' (the tests run as root, as CI does).
private final class Tree {
  let path: String

  init() throws {
    path = try Sys.makeTemporaryDirectory(prefix: NSTemporaryDirectory() + "appbox-trust-")
    try Sys.chmod(path, 0o755)
  }

  deinit { try? FileManager.default.removeItem(atPath: path) }

  /// Makes the directory `name` with `mode`, owned by `uid`.
  @discardableResult
  func directory(_ name: String, mode: mode_t, uid: uid_t = 0) throws -> String {
    let made = path + "/" + name
    try Sys.mkdir(made, mode)
    try Sys.chmod(made, mode)
    guard chown(made, uid, uid) == 0 else { throw Errno.current }
    return made
  }
}

/// What a path holds now, for checks (nil: nothing).
private func contents(_ path: String) -> String? {
  (try? Sys.readFile(path)).map { String(decoding: $0, as: UTF8.self) }
}

/// The runtime directory is used only where no one but its owner and root can have put it,
/// and, once opened, every runtime file is reached through its descriptor, whatever
/// happens to the path afterwards (docs/reference.md#security).
@Suite("Runtime directory: trusted path, one descriptor", .serialized)
struct RuntimeDirectoryTrustTests {
  static let other: uid_t = 5

  @Test("a runtime directory below another user's directory is not used (root with su's XDG_RUNTIME_DIR)")
  func belowAnotherUsersDirectory() throws {
    let tree = try Tree()
    let foreign = try tree.directory("u5rt", mode: 0o700, uid: Self.other)
    guard case .unsafeParent(let why) = try RuntimeDirectory.open(foreign + "/appbox", for: 0, create: true) else {
      Issue.record("opened below uid \(Self.other)'s directory")
      return
    }
    #expect(why.contains("owned by uid \(Self.other)"), "\(why)")
    #expect(!FileManager.default.fileExists(atPath: foreign + "/appbox"), "created below another user's directory")
    // As the command line takes it: root's own directory instead, with a notice.
    var notices: [String] = []
    let directory = try RuntimeDirectory.current(
      environment: ["XDG_RUNTIME_DIR": foreign], uid: 0, notice: { notices.append($0) })
    #expect(directory.path == "/run/appbox")
    #expect(notices.count == 1 && notices[0].contains(foreign) && notices[0].contains("/run/appbox"), "\(notices)")
  }

  @Test("below a directory others may write: refused without the sticky bit, used with it (as /tmp)")
  func writableParents() throws {
    let tree = try Tree()
    let open = try tree.directory("open", mode: 0o777)
    guard case .unsafeParent(let why) = try RuntimeDirectory.open(open + "/appbox", for: 0, create: true) else {
      Issue.record("opened in a directory anyone may write")
      return
    }
    #expect(why.contains("not sticky"), "\(why)")
    let sticky = try tree.directory("sticky", mode: 0o1777)
    guard case .opened(let directory) = try RuntimeDirectory.open(sticky + "/appbox", for: 0, create: true) else {
      Issue.record("not opened in a sticky directory")
      return
    }
    #expect(try Sys.fstat(directory.fd).st_mode & 0o7777 == 0o700)
    // Deeper down, a directory of another user's in the chain is refused too.
    let theirs = try tree.directory("theirs", mode: 0o755, uid: Self.other)
    try Sys.mkdir(theirs + "/mine", 0o755)
    guard case .unsafeParent = try RuntimeDirectory.open(theirs + "/mine/appbox", for: 0, create: true) else {
      Issue.record("opened below a directory of another user's")
      return
    }
  }

  @Test("the directory itself: a symlink, another user's, or writable by others is not used; a missing one is made")
  func theDirectoryItself() throws {
    let tree = try Tree()
    let target = try tree.directory("target", mode: 0o700)
    try Sys.mkdir(tree.path + "/parent", 0o755)
    let path = tree.path + "/parent/appbox"
    #expect(symlink(target, path) == 0)
    guard case .unsafe(let link) = try RuntimeDirectory.open(path, for: 0, create: true) else {
      Issue.record("a symlink was opened")
      return
    }
    #expect(link == "a symlink")
    try Sys.unlink(path)
    try Sys.mkdir(path, 0o700)
    #expect(chown(path, Self.other, Self.other) == 0)
    guard case .unsafe(let owned) = try RuntimeDirectory.open(path, for: 0, create: true) else {
      Issue.record("another user's directory was opened")
      return
    }
    #expect(owned.contains("uid \(Self.other)"))
    #expect(chown(path, 0, 0) == 0)
    try Sys.chmod(path, 0o777)
    guard case .unsafe = try RuntimeDirectory.open(path, for: 0, create: true) else {
      Issue.record("a directory others may write was opened")
      return
    }
    #expect(try RuntimeDirectory.open(tree.path + "/parent/absent", for: 0, create: false).isMissing)
    #expect(try RuntimeDirectory.open(tree.path + "/absent/appbox", for: 0, create: true).isMissing)
  }

  @Test("after the checks, the directory renamed and a symlink to another's put in its place redirects no file")
  func swappedAfterTheChecks() throws {
    let tree = try Tree()
    let parent = try tree.directory("run", mode: 0o755)
    let victim = tree.path + "/victim"
    try Sys.replaceFile(victim, with: Array("root's\n".utf8), mode: 0o600)
    guard case .opened(let runtime) = try RuntimeDirectory.open(parent + "/appbox", for: 0, create: true) else {
      Issue.record("not opened")
      return
    }
    let files = runtime.files(for: "/some/mountpoint")
    // Another directory with every runtime file a symlink to the victim (the event log
    // directory a symlink to a directory of another's), swapped in.
    let evil = try tree.directory("evil", mode: 0o755)
    let elsewhere = try tree.directory("elsewhere", mode: 0o700)
    for name in [files.logName, files.pidName, files.socketName] {
      #expect(symlink(victim, evil + "/" + name) == 0)
    }
    #expect(symlink(elsewhere, evil + "/" + files.eventLogsName) == 0)
    try Sys.rename(parent + "/appbox", to: parent + "/appbox.x")
    #expect(symlink(evil, parent + "/appbox") == 0)

    let log = try files.openLog()
    defer { Sys.close(log) }
    try Sys.writeAll(log, Array("a log line\n".utf8))
    try files.writePID(getpid())
    #expect(try files.daemon() == getpid())
    let created = try EventLogDirectory(files, owner: 0).createLog()
    let events = EventLog(path: created.path, id: created.id, limits: EventLogLimits())
    events.flush()
    let socket = try files.listen()
    Sys.close(socket)

    #expect(contents(victim) == "root's\n", "the victim was written")
    let kept = parent + "/appbox.x/"
    #expect(contents(kept + files.logName) == "a log line\n")
    #expect(contents(kept + files.pidName) == "\(getpid())\n")
    let header = contents(kept + files.eventLogsName + "/" + EventLogDirectory.currentName(created.id))
    #expect(header?.contains(created.id) == true, "\(header ?? "no log")")
    #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty, "the event log went elsewhere")
    #expect(try Sys.lstatPath(kept + files.socketName).st_mode & S_IFMT == S_IFSOCK)
    for name in [files.logName, files.eventLogsName, files.pidName, files.socketName] {
      #expect(try Sys.lstatPath(evil + "/" + name).st_mode & S_IFMT == S_IFLNK, "\(name) replaced")
    }
  }

  @Test("files put in the directory are refused: a symlink, a second link, a FIFO (without blocking), another's")
  func plantedFiles() throws {
    let tree = try Tree()
    guard case .opened(let runtime) = try RuntimeDirectory.open(tree.path + "/appbox", for: 0, create: true) else {
      Issue.record("not opened")
      return
    }
    let files = runtime.files(for: "/planted")
    let victim = tree.path + "/victim"
    try Sys.replaceFile(victim, with: Array("root's\n".utf8), mode: 0o600)
    let directory = runtime.path + "/"

    #expect(symlink(victim, directory + files.logName) == 0)
    #expect(throws: CLIError.self) { try files.openLog() }
    try Sys.unlink(directory + files.logName)
    #expect(link(victim, directory + files.logName) == 0)
    #expect(throws: CLIError.self) { try files.openLog() }
    #expect(contents(victim) == "root's\n")

    // FIFOs where a reader expects the pid file or an event log: refused at once.
    #expect(mkfifo(directory + files.pidName, 0o600) == 0)
    #expect(throws: Errno.notPermitted) { try files.daemon() }
    #expect(files.daemonPID == nil)
    let logs = EventLogDirectory(files, owner: 0)
    let id = try logs.createLog().id
    let log = directory + files.eventLogsName + "/" + EventLogDirectory.currentName(id)
    try Sys.unlink(log)
    #expect(mkfifo(log, 0o600) == 0)
    #expect(throws: CLIError.self) { try logs.openSegments(id) }
    // A regular file of another user's.
    try Sys.unlink(log)
    try Sys.replaceFile(log, with: Array("{}\n".utf8), mode: 0o644)
    #expect(chown(log, Self.other, Self.other) == 0)
    #expect(throws: CLIError.self) { try logs.openSegments(id) }
  }
}

extension RuntimeDirectory.Opening {
  fileprivate var isMissing: Bool {
    if case .missing = self { return true }
    return false
  }
}

/// A listing of `/tmp` that fails part-way is an error, not a short list (issue #25).
@Suite("Runtime directory: fallback listing fails closed")
struct RuntimeDirectoryListingTests {
  @Test func readdirFailureIsAnError() throws {
    try SyscallFaults.inject([.readdir: SyscallFault(.ioError)]) { faults in
      #expect(throws: CLIError.self) { try RuntimeDirectory.fallbacks(for: Sys.effectiveUID) }
      #expect(faults.failures(.readdir) == 1)
    }
  }
}
