import AppBoxFS
import Foundation
import FuseBridge
import Posix

/// `appbox mount`: checks everything first, then mounts in a background daemon (a child
/// of this same binary in foreground mode, reporting readiness through a pipe) or in
/// this process with `--foreground`.
enum MountCommand {
  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    // --fstab: print the fstab line for the other options instead of mounting.
    let printsFstab = arguments.contains("--fstab")
    var request = try MountRequest.parse(arguments.filter { $0 != "--fstab" })
    // The environment's transport, where the command line names none (checked here, in
    // the parent, and read again by the daemon, which inherits the environment).
    if request.transport == nil { request.transport = try MountRequest.environmentTransport() }
    if printsFstab {
      let mountpoint = absolute(request.mountpoint)
      print(
        MountOptions.fstabLine(
          request, backing: request.backing.map(absolute) ?? defaultBacking(for: mountpoint), mountpoint: mountpoint))
      return .success
    }
    request.readyFD = try ReadinessHandshake.inherited()
    let mountpoint = try checkedMountpoint(request.mountpoint, nonempty: request.nonempty)
    request.mountpoint = mountpoint
    try checkFuseDevice()
    let backing = try checkedBacking(request.backing, mountpoint: mountpoint)
    // With no --backing the data goes to a directory the user never named: say which.
    let notice =
      request.backing == nil
      ? "appbox: the data of \(mountpoint) lives in \(backing) (the default backing directory; --backing DIR chooses another)\n"
      : nil
    request.backing = backing
    let runtime = try RuntimeDirectory.current()
    runtime.pruneOldLogs()
    let files = runtime.files(for: mountpoint)
    if request.readyFD != nil { return try Daemon(request: request, files: files).run() }
    if request.foreground {
      if let notice { FileHandle.standardError.write(Data(notice.utf8)) }
      return try Daemon(request: request, files: files).run()
    }
    let code = try startInBackground(request, arguments: arguments, files: files)
    if let notice { FileHandle.standardError.write(Data(notice.utf8)) }
    return code
  }

  /// `path` made absolute against the working directory (not resolved: it need not exist).
  static func absolute(_ path: String) -> String {
    path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
  }

  /// The backing directory a mount at `mountpoint` gets without `--backing`:
  /// `$XDG_DATA_HOME/appbox/containers/NAME`, NAME being the mountpoint's last component.
  static func defaultBacking(for mountpoint: String) -> String {
    let environment = ProcessInfo.processInfo.environment
    let dataHome =
      environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
      ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.local/share")
    let name = mountpoint == "/" ? "root" : (mountpoint as NSString).lastPathComponent
    return dataHome + "/appbox/containers/" + name
  }

  /// Resolves the mountpoint and refuses a missing one, a non-directory, a busy one (one
  /// where a FUSE filesystem, AppBox or another, is mounted), and, unless `nonempty`, one
  /// with entries, which the mount would hide until the unmount. Other mounts (a bind
  /// mount, a volume, a tmpfs) are mounted over, as mount(8) does, and show again after
  /// the unmount: a container's volume is always a mount.
  static func checkedMountpoint(_ path: String, nonempty: Bool) throws(CLIError) -> String {
    let absolute: String
    do { absolute = try Sys.realpath(path) } catch {
      throw CLIError(
        .noInput,
        error == .noEntry
          ? "mountpoint \(path) does not exist: create it first (mkdir -p \(path))" : "mountpoint \(path): \(error)")
    }
    let st: stat
    do { st = try Sys.statPath(absolute) } catch { throw CLIError(.noInput, "mountpoint \(path): \(error)") }
    guard st.st_mode & S_IFMT == S_IFDIR else { throw CLIError(.noInput, "mountpoint \(path) is not a directory") }
    if let mount = try MountTable.mount(at: absolute), mount.isFUSE {
      throw CLIError(
        .busy, "\(absolute) is already mounted (\(mount.type)); unmount it first (appbox unmount \(absolute))")
    }
    if !nonempty {
      let entry: String?
      do { entry = try firstEntry(of: absolute) } catch {
        throw CLIError(
          .noInput, "cannot list \(absolute) to check that it is empty (\(error)); --nonempty mounts over it as it is")
      }
      if let entry {
        throw CLIError(
          .noInput,
          "\(absolute) is not empty (it holds \(entry)): the mount would hide its entries until the unmount. Mount on an empty directory, or give --nonempty (-o nonempty) to mount over them"
        )
      }
    }
    return absolute
  }

  /// The name of one entry of the directory `path` other than `.` and `..`, nil when
  /// there is none.
  static func firstEntry(of path: String) throws(Errno) -> String? {
    let stream = try DirectoryStream(fd: try Sys.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC))
    while let item = try stream.next() {
      let name = String(cString: item.name)
      if name != "." && name != ".." { return name }
    }
    return nil
  }

  /// Refuses to go on without a usable `/dev/fuse`.
  static func checkFuseDevice() throws(CLIError) {
    let fd: Int32
    do { fd = try Sys.open("/dev/fuse", O_RDWR) } catch {
      let reason = error.description
      throw CLIError(
        .unavailable,
        "FUSE is not available: cannot open /dev/fuse (\(reason)). Install fuse3 and load the fuse module; in a container, run with --device /dev/fuse --cap-add SYS_ADMIN"
      )
    }
    Sys.close(fd)
  }

  /// The backing directory: the given one must exist and be usable; the default one is
  /// created.
  static func checkedBacking(_ given: String?, mountpoint: String) throws(CLIError) -> String {
    let path: String
    if let given {
      path = given
    } else {
      path = defaultBacking(for: mountpoint)
      do {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
      } catch {
        throw CLIError(.noInput, "cannot create the default backing directory \(path): \(error.localizedDescription)")
      }
    }
    let absolute: String
    do { absolute = try Sys.realpath(path) } catch {
      throw CLIError(
        .noInput,
        error == .noEntry
          ? "backing directory \(path) does not exist: create it, or leave out --backing for the default"
          : "backing directory \(path): \(error)")
    }
    let st: stat
    do { st = try Sys.statPath(absolute) } catch { throw CLIError(.noInput, "backing directory \(path): \(error)") }
    guard st.st_mode & S_IFMT == S_IFDIR else {
      throw CLIError(.noInput, "backing directory \(path) is not a directory")
    }
    do { try Sys.access(absolute, R_OK | W_OK | X_OK) } catch {
      throw CLIError(.noInput, "backing directory \(path) is not readable and writable by you: \(error)")
    }
    if absolute == mountpoint || mountpoint.hasPrefix(absolute + "/") || absolute.hasPrefix(mountpoint + "/") {
      throw CLIError(.usage, "the backing directory and the mountpoint must not contain each other")
    }
    return absolute
  }

  /// Starts the daemon (this binary again, as `mount ARGUMENTS`, the readiness pipe handed
  /// over through the environment: ``ReadinessHandshake``) and waits until it reports the
  /// mount ready (or why it failed).
  static func startInBackground(_ request: MountRequest, arguments: [String], files: MountFiles) throws(CLIError)
    -> ExitCode
  {
    let pipe: ReadinessPipe
    do throws(Errno) { pipe = try ReadinessPipe() } catch { throw CLIError(.osError, "cannot create a pipe: \(error)") }
    let arguments = [Spawn.currentExecutable, "mount"] + arguments
    let pid: pid_t
    do {
      pid = try Spawn.start(
        arguments[0], arguments, detach: true, passing: pipe.writeFD,
        environment: [ReadinessHandshake.environmentEntry])
    } catch {
      throw CLIError(.osError, "cannot start the daemon: \(error)")
    }
    Sys.close(pipe.writeFD)
    // Progress lines (the index of a large sandbox takes seconds) come before the answer.
    let terminal = TerminalProgress()
    var message = ""
    let rest = pipe.readLines { bytes in
      let line = String(decoding: bytes, as: UTF8.self)
      if line.hasPrefix("progress ") {
        terminal.update(String(line.dropFirst("progress ".count)))
      } else if line.hasPrefix("done ") {
        terminal.finish(String(line.dropFirst("done ".count)))
      } else {
        message += line + "\n"
      }
    }
    message += String(decoding: rest, as: UTF8.self)
    Sys.close(pipe.readFD)
    terminal.end()
    if message.hasPrefix("ready") { return .success }
    let status = Spawn.wait(pid)
    if let failure = DaemonFailure(message) { throw CLIError(failure.code, failure.message) }
    throw CLIError(.failure, "the daemon exited (status \(status)) before the mount was ready; see \(files.log)")
  }
}

/// A failure the daemon reports through the readiness pipe: `error CODE MESSAGE`.
struct DaemonFailure {
  let code: ExitCode
  let message: String

  init(code: ExitCode, message: String) {
    self.code = code
    self.message = message
  }

  init?(_ line: String) {
    let parts = line.split(separator: " ", maxSplits: 2)
    guard parts.count == 3, parts[0] == "error", let raw = Int32(parts[1]), let code = ExitCode(rawValue: raw) else {
      return nil
    }
    self.code = code
    self.message = String(parts[2]).trimmingCharacters(in: .newlines)
  }

  var line: String { "error \(code.rawValue) \(message)\n" }
}
