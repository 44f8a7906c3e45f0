import Foundation
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Whether FUSE mount tests can run here. In CI (`CI` set) they always run, so that a
/// machine without FUSE fails loudly instead of skipping.
enum FuseSupport {
  static let usable: Bool = {
    if ProcessInfo.processInfo.environment["CI"] != nil { return true }
    let fd = open("/dev/fuse", O_RDWR | O_CLOEXEC)
    if fd >= 0 { close(fd) }
    return fd >= 0
  }()
}

extension Trait where Self == ConditionTrait {
  /// Needs a working `/dev/fuse` (never skipped in CI).
  static var needsFUSE: Self { .enabled(if: FuseSupport.usable, "needs /dev/fuse") }
}

/// The result of running a command.
struct CommandResult {
  let status: Int32
  let output: String
  let error: String
}

/// Runs external programs for the tests.
enum Command {
  /// The `appbox` binary built next to this test bundle, or `$APPBOX_TEST_BINARY` (to run
  /// the tests against another build, e.g. to see a new test fail before a fix).
  static let appbox: String = {
    if let binary = ProcessInfo.processInfo.environment["APPBOX_TEST_BINARY"], binary.hasPrefix("/") { return binary }
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let exe = String(decoding: buffer[..<max(count, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return (exe as NSString).deletingLastPathComponent + "/appbox"
  }()

  /// Runs `executable` (a path, or a name looked up in PATH) and captures its output.
  @discardableResult
  static func run(
    _ executable: String, _ arguments: [String], input: Data? = nil, environment: [String: String]? = nil,
    directory: String? = nil
  ) throws -> CommandResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/env")
    process.arguments = executable.hasPrefix("/") ? arguments : [executable] + arguments
    if let environment { process.environment = environment }
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let inPipe = Pipe()
    process.standardInput = inPipe
    try process.run()
    if let input { inPipe.fileHandleForWriting.write(input) }
    try inPipe.fileHandleForWriting.close()
    // Read both pipes concurrently so a chatty child cannot block on a full pipe.
    nonisolated(unsafe) var errData = Data()
    let group = DispatchGroup()
    DispatchQueue.global().async(group: group) { errData = err.fileHandleForReading.readDataToEndOfFile() }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return CommandResult(
      status: process.terminationStatus, output: String(decoding: outData, as: UTF8.self),
      error: String(decoding: errData, as: UTF8.self))
  }

  /// Runs a shell snippet with `bash -c`, failing the test on a non-zero exit.
  @discardableResult
  static func shell(_ script: String, directory: String? = nil, sourceLocation: SourceLocation = #_sourceLocation)
    throws
    -> String
  {
    let result = try run("/bin/bash", ["-c", "set -euo pipefail; " + script], directory: directory)
    #expect(
      result.status == 0, "\(script) exited \(result.status): \(result.error)\(result.output)",
      sourceLocation: sourceLocation)
    return result.output
  }
}

/// A temporary root holding `backing/` and `mnt/` for one test; at release, a mount left
/// on `mnt/` is detached and the root removed.
final class SandboxDirectories {
  let root: String
  let backing: String
  let mountpoint: String

  init(prefix: String = "appbox-test") throws {
    var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
    root = String(cString: made)
    backing = root + "/backing"
    mountpoint = root + "/mnt"
    try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
  }

  /// The tmpfs mounts made by ``mountTmpfs(_:)``, unmounted at release.
  private var tmpfsMounts: [String] = []

  /// Puts the directory `path` (below `root`) on a tmpfs of its own (as root): a
  /// filesystem that opens files by handle wherever the tests run, which `/tmp` is not
  /// when it is a container's overlay.
  func mountTmpfs(_ path: String) throws {
    let result = try Command.run("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=512m,mode=0755", "appbox-test", path])
    guard result.status == 0 else { throw FixtureError("mount -t tmpfs on \(path): \(result.error)") }
    tmpfsMounts.append(path)
  }

  deinit {
    // Best effort at release: nothing here is a test's result (a test checks its own unmount).
    if MountFixture.isMounted(mountpoint) {
      _ = try? Command.run("/usr/bin/fusermount3", ["-uz", mountpoint])
    }
    for path in tmpfsMounts.reversed() { _ = try? Command.run("/usr/bin/umount", ["-l", path]) }
    _ = try? FileManager.default.removeItem(atPath: root)
  }
}

/// A sandbox mounted for one test: its own temporary backing directory and mountpoint,
/// mounted through the real `appbox` binary, unmounted (and checked for leaked file
/// handles and a clean daemon exit) by ``unmount()``.
final class MountFixture {
  let directories: SandboxDirectories
  var root: String { directories.root }
  var backing: String { directories.backing }
  var mountpoint: String { directories.mountpoint }
  private(set) var mounted = false
  private(set) var daemonPID: pid_t?
  /// The extra arguments of `appbox mount`, for ``remount(sourceLocation:)``.
  private let arguments: [String]

  /// Creates the directories and mounts. Extra `arguments` go to `appbox mount`;
  /// `backingOnTmpfs` puts the backing directory on a tmpfs of its own (root only).
  init(arguments: [String] = [], backingOnTmpfs: Bool = false, prepare: ((String) throws -> Void)? = nil) throws {
    directories = try SandboxDirectories()
    self.arguments = arguments
    if backingOnTmpfs { try directories.mountTmpfs(directories.backing) }
    try prepare?(directories.backing)
    try mount()
  }

  /// Mounts the backing directory on the mountpoint with the fixture's arguments.
  private func mount() throws {
    let result = try Command.run(Command.appbox, ["mount", "--backing", backing] + arguments + [mountpoint])
    guard result.status == 0 else {
      throw FixtureError("appbox mount exited \(result.status): \(result.error)")
    }
    guard Self.isMounted(mountpoint) else {
      throw FixtureError("appbox mount returned but \(mountpoint) is not mounted")
    }
    mounted = true
    daemonPID = Self.daemonPID(for: mountpoint)
  }

  /// Unmounts (with ``unmount(sourceLocation:)``'s checks) and mounts the same backing
  /// directory again: the kernel forgets every inode of the mount (the daemon gets their
  /// forgets) and a new daemon measures the backing tree afresh.
  func remount(sourceLocation: SourceLocation = #_sourceLocation) throws {
    try unmount(sourceLocation: sourceLocation)
    try mount()
  }

  /// A path inside the mount.
  func path(_ relative: String) -> String { mountpoint + "/" + relative }

  /// The same path inside the backing directory.
  func backingPath(_ relative: String) -> String { backing + "/" + relative }

  /// Unmounts through `appbox unmount`, then checks the daemon left no open file handles
  /// behind and exited.
  func unmount(sourceLocation: SourceLocation = #_sourceLocation) throws {
    guard mounted else { return }
    // Release of the last handles is asynchronous: wait for it, with a deadline.
    let leaked = waitUntil { openFileHandles().isEmpty }
    #expect(leaked, "daemon still holds file handles: \(openFileHandles())", sourceLocation: sourceLocation)
    let result = try Command.run(Command.appbox, ["unmount", mountpoint])
    #expect(result.status == 0, "appbox unmount: \(result.error)", sourceLocation: sourceLocation)
    mounted = !(result.status == 0)
    #expect(!Self.isMounted(mountpoint), sourceLocation: sourceLocation)
    if let pid = daemonPID {
      #expect(
        Spawn.waitForExit(pid, milliseconds: 10_000), "daemon \(pid) did not exit", sourceLocation: sourceLocation)
    }
  }

  /// Polls `condition` every 10 ms until it holds or `seconds` pass.
  @discardableResult
  func waitUntil(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
      if condition() { return true }
      usleep(10_000)
    }
    return condition()
  }

  static func isMounted(_ path: String) -> Bool {
    mountTable().split(separator: "\n").contains {
      $0.split(separator: " ").dropFirst(4).first.map(String.init) == path
    }
  }

  /// `/proc/self/mountinfo`, read to its end (`String(contentsOfFile:)` stops after the
  /// first page of a `/proc` file).
  static func mountTable() -> String {
    guard let bytes = try? readFile("/proc/self/mountinfo") else { return "" }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// The daemon serving `mountpoint` (mounted by root): the live process its pid file
  /// names.
  static func daemonPID(for mountpoint: String) -> pid_t? {
    guard let bytes = try? readFile(ControlFiles.path(for: mountpoint, "pid")),
      let pid = pid_t(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
      pid > 0, kill(pid, 0) == 0
    else { return nil }
    return pid
  }

  /// The daemon's descriptors that are open files (not `O_PATH` inode references, not
  /// `/dev/fuse`, not standard streams, the log, the event log, the lock on the backing
  /// directory or a device's claim on its control-group directory). A failure to list them
  /// is one entry naming it, so a wait for none fails.
  func openFileHandles() -> [String] {
    let backing = URL(fileURLWithPath: backing).resolvingSymlinksInPath().path
    // Absent: no hierarchy is mounted, and no descriptor is a claim.
    let groups = (try? ControlGroups.mountedHierarchy()).flatMap { $0.map { $0 + "/appbox/" } }
    let descriptors: [DaemonDescriptor]
    do { descriptors = try Self.descriptors(ofMount: mountpoint) } catch { return ["(\(error))"] }
    return descriptors.filter { descriptor in
      let target = descriptor.target
      return descriptor.fd > 2 && !descriptor.pathOnly && target.hasPrefix("/") && target != backing
        && target != "/dev/fuse" && !target.hasSuffix(".log") && !target.hasSuffix(".jsonl")
        && !(groups.map { target.hasPrefix($0) } ?? false)
    }.map(\.target)
  }

  /// The descriptors of the daemon serving `mountpoint` (mounted by root) that are open
  /// files, or `O_PATH` references to unlinked files, as the daemon itself reports them
  /// (the `descriptors` request of `appbox status --descriptors`, sent straight to its
  /// socket: the waits poll it). Reading `/proc/PID/fd` of the daemon instead needs
  /// CAP_SYS_PTRACE once it served another user (its credentials changed), which root in
  /// a container does not have.
  static func descriptors(ofMount mountpoint: String) throws -> [DaemonDescriptor] {
    let socket = ControlFiles.path(for: mountpoint, "sock")
    let fd: Int32
    do { fd = try UnixSocket.connect(to: socket) } catch { throw FixtureError("connect to \(socket): \(error)") }
    defer { close(fd) }
    let deadline = Clock.monotonic() + 10
    UnixSocket.writeAll(fd, Array("descriptors\n".utf8), deadline: deadline)
    let reply = UnixSocket.readLine(fd, limit: 16 << 20, deadline: deadline).line ?? []
    guard let object = try? JSONSerialization.jsonObject(with: Data(reply)) as? [String: Any],
      let list = object["descriptors"] as? [[String: Any]]
    else {
      throw FixtureError("the daemon's descriptors reply: \(String(decoding: reply.prefix(300), as: UTF8.self))")
    }
    return list.compactMap { item in
      guard let fd = item["fd"] as? Int, let target = item["target"] as? String,
        let pathOnly = item["pathOnly"] as? Bool
      else { return nil }
      return DaemonDescriptor(fd: fd, target: target, pathOnly: pathOnly)
    }
  }
}

/// One of a daemon's descriptors, as `appbox status --descriptors` reports it.
struct DaemonDescriptor {
  let fd: Int
  let target: String
  /// An `O_PATH` inode reference, not an open file.
  let pathOnly: Bool
}

struct FixtureError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
