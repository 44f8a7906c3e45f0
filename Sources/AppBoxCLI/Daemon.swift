import AppBoxFS
import Foundation
import FuseBridge
import Posix

/// The process that serves one mount until it is unmounted or signalled.
struct Daemon {
  let request: MountRequest
  let files: MountFiles

  func run() throws(CLIError) -> ExitCode {
    let session: FuseSession
    let filesystem: SandboxFilesystem
    let runGroups: RunGroups?
    var configuration = FuseConfiguration()
    configuration.passthrough = request.passthrough
    configuration.writeCache = request.writeCache
    configuration.busyPollMicroseconds =
      request.busyPollMicroseconds ?? FuseConfiguration.defaultBusyPoll(availableCPUs: ResourceLimits.availableCPUs)
    configuration.maxRead = request.maxRead ?? 0
    configuration.transport = request.transport ?? configuration.transport
    configuration.cpuHandoff = request.cpuHandoff
    if request.fuseOptions.contains("auto_unmount") {
      // fusermount3 unmounts after the daemon's death only when the mount answers
      // ENOTCONN at once; over io_uring the kernel lets go of the connection a moment
      // later, and a request in between ends otherwise (docs/reference.md).
      configuration.ioUringRefusal = "-o auto_unmount needs /dev/fuse: fusermount3 unmounts only on ENOTCONN"
    }
    do {
      (session, filesystem, runGroups) = try start(configuration)
    } catch {
      guard let fd = request.readyFD else { throw error }
      // The parent prints the message (once) and exits with its code.
      ReadinessPipe.send(DaemonFailure(code: error.code, message: error.message).line, to: fd)
      return error.code
    }
    // Ready only once the kernel has taken the answer to INIT: a mount that fails there
    // (an option libfuse refuses only then) is reported as failed, not as ready.
    let readyFD = request.readyFD
    if readyFD != nil { detachOutput() }
    let result = session.run(configuration: configuration) {
      if let readyFD { ReadinessPipe.send("ready\n", to: readyFD) }
    }
    filesystem.unmounted()
    session.unmount()
    runGroups?.finish()
    remove(files.pidName)
    remove(files.socketName)
    switch session.initialization {
    case .done: return result < 0 ? .failure : .success
    case .failed(let error):
      let message =
        "FUSE INIT failed (\(error)): the kernel and libfuse did not agree; nothing is mounted"
        + (readyFD == nil ? "" : " (libfuse's reason is in \(files.log))")
      if let readyFD { ReadinessPipe.send(DaemonFailure(code: .osError, message: message).line, to: readyFD) }
      throw CLIError(.osError, message)
    case .pending:
      let message = "the session ended before FUSE INIT; nothing is mounted"
      if let readyFD { ReadinessPipe.send(DaemonFailure(code: .osError, message: message).line, to: readyFD) }
      throw CLIError(.osError, message)
    }
  }

  /// Sets up the filesystem and the session, and mounts.
  private func start(_ configuration: FuseConfiguration) throws(CLIError) -> (
    FuseSession, SandboxFilesystem, RunGroups?
  ) {
    // Modes are created as given: a request's umask is set on its worker thread alone
    // (Caller.asCreator).
    Sys.umask(0)
    // A control client or the waiting `appbox mount` that goes away must not end the
    // daemon: the readiness pipe and the control socket are written before and beside
    // the session loop, whose own SIGPIPE handler comes only when it starts.
    TerminationSignals.ignoreBrokenPipes()
    ResourceLimits.raiseOpenFiles()
    if request.enableURing { try Self.enableURing() }
    let backing = request.backing!
    // Before anything touches the backing directory: one mount per backing directory. The
    // lock's descriptor is never closed: the kernel releases it when the daemon exits.
    _ = try BackingLock.acquire(backing)
    do throws(DeviceBacking.Problem) { try DeviceBacking.check(backing, device: request.sandbox.device) } catch {
      throw CLIError(error.errno == nil ? .badValue : .noInput, "cannot mount \(backing): \(error)")
    }
    // This mount's own event log, named by its id (earlier mounts' logs stay beside it).
    let log = try EventLogDirectory(files, owner: Sys.effectiveUID).createLog()
    let filesystem: SandboxFilesystem
    let runGroups = request.sandbox.device ? RunGroups(mountID: log.id) : nil
    do throws(SandboxSetupError) {
      var options = request.sandbox
      options.eventsPath = log.path
      options.eventLogID = log.id
      options.eventLogLimits.segmentBytes = EventLogDirectory.segmentBytes
      filesystem = try SandboxFilesystem(
        backingDirectory: backing, configuration: configuration.timeouts, options: options, driver: FuseDriver(),
        indexProgress: indexProgress().report, runs: runGroups)
    } catch {
      switch error {
      case .system(let errno):
        throw CLIError(
          .noInput,
          "cannot set up the sandbox in \(backing): \(errno) (a fixed directory such as Documents must be a directory, not a file or symlink)"
        )
      case .unknownDefaultProtection:
        throw CLIError(.badValue, "cannot mount \(backing): \(error)")
      case .unreadableDefaultProtection:
        throw CLIError(.osError, "cannot mount \(backing): \(error)")
      }
    }
    // The type fuse.appbox (subtype) is how appbox tells its mounts apart; the source
    // (fsname) is the user's to choose.
    var options = ["default_permissions", "fsname=\(request.fsname ?? "appbox")", "subtype=appbox"]
    if Sys.effectiveUID == 0 { options.append("allow_other") }
    for option in request.fuseOptions where !options.contains(option) { options.append(option) }
    let session: FuseSession
    do {
      session = try FuseSession(filesystem: filesystem, configuration: configuration, options: options)
    } catch {
      throw CLIError(.usage, "\(error)")
    }
    do {
      try ControlServer(files: files, filesystem: filesystem, mountpoint: request.mountpoint, runGroups: runGroups)
        .start()
    } catch {
      throw CLIError(.osError, "cannot create the control socket \(files.socket): \(error)")
    }
    do {
      try files.writePID(Sys.processID)
    } catch {
      throw CLIError(.osError, "cannot write the pid file \(files.pid): \(error)")
    }
    do {
      try session.mount(request.mountpoint)
    } catch {
      remove(files.pidName)  // this daemon ends here
      throw CLIError(
        .osError,
        "the kernel refused to mount on \(request.mountpoint) (see the message above; allow_other without root needs user_allow_other in /etc/fuse.conf)"
      )
    }
    return (session, filesystem, runGroups)
  }

  /// Where the index's progress goes: through the readiness pipe to the `appbox mount`
  /// that waits for this daemon (which shows it if its standard error is a terminal), or,
  /// in the foreground, to this process's terminal.
  private func indexProgress() -> IndexProgressLines {
    if let fd = request.readyFD {
      return IndexProgressLines { line, isFinal in
        ReadinessPipe.post((isFinal ? "done " : "progress ") + line, to: fd)
      }
    }
    let terminal = TerminalProgress()
    return IndexProgressLines { line, isFinal in isFinal ? terminal.finish(line) : terminal.update(line) }
  }

  /// Removes one of the daemon's runtime files (`name` in its runtime directory) at its
  /// end. One already gone is what was wanted; one left behind (an error, said on standard
  /// error, the log) is replaced by the next mount and names no live daemon, which
  /// ``ControlClient`` checks.
  private func remove(_ name: String) {
    do { try files.remove(name) } catch  where error != .noEntry {
      FileHandle.standardError.write(Data("appbox: cannot remove \(files.directory.path)/\(name): \(error)\n".utf8))
    } catch {}
  }

  /// Turns on FUSE over io_uring for the whole host (`--enable-uring`): the fuse module's
  /// `enable_uring` parameter, which only root may write.
  static func enableURing() throws(CLIError) {
    let parameter = "/sys/module/fuse/parameters/enable_uring"
    do throws(Errno) {
      let fd = try Sys.open(parameter, O_WRONLY | O_CLOEXEC, 0)
      defer { Sys.close(fd) }
      try Sys.writeAll(fd, Array("1\n".utf8))
    } catch {
      throw CLIError(
        .noPermission,
        "--enable-uring: cannot write 1 to \(parameter): \(error) (it needs root, and a kernel with FUSE over io_uring, Linux 6.14 or later)"
      )
    }
    FileHandle.standardError.write(Data("appbox: turned FUSE over io_uring on for this host (\(parameter) = 1)\n".utf8))
  }

  /// Before serving: standard output and error go to the mount's log file
  /// (``MountFiles/openLog()``). Without a log (it cannot be opened, is not this user's
  /// regular file, or a descriptor cannot be replaced) output goes where it went, the
  /// terminal of `appbox mount`, which says nothing worse than losing it.
  private func detachOutput() {
    let fd: Int32
    do { fd = try files.openLog() } catch {
      FileHandle.standardError.write(Data("appbox: \(error.message)\n".utf8))
      return
    }
    defer { Sys.close(fd) }
    do {
      try Sys.dup2(fd, 1)
      try Sys.dup2(fd, 2)
    } catch {
      FileHandle.standardError.write(Data("appbox: cannot send output to \(files.log): \(error)\n".utf8))
    }
  }
}
