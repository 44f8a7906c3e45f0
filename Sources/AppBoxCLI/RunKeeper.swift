import Foundation
import Posix

/// The process of `appbox run` that keeps the program's tree: a child of the `appbox run`
/// the user started, it becomes a child subreaper, registers as the run with the mount's
/// daemon (``RunRegistration``), starts the program, and reports the program's exit
/// status to its parent, which exits with it. When nothing of the tree is left, it says so
/// (`exit N ended`) and ends, and the parent reaps it before it returns: the run is over
/// when `appbox run` is. Else it stays until the last process of the tree has ended: orphans are re-parented to it, never out of the tree, so every process
/// the program left behind, and everything those start later, stays under the run's rule
/// for as long as it runs, with nothing for the daemon to record when the program ends.
/// To stay, it lets go of everything it shares with its caller (standard descriptors,
/// working directory, inherited descriptors: it becomes a fresh `appbox` process, the
/// same process, with nothing open but `/dev/null`) and ignores a terminal's signals.
///
/// The parent starts it as `appbox run [--allow-device-control] MOUNTPOINT -- PROGRAM…`
/// with ``variable`` set to `here:FD` or `reused:FD` (no command-line option: nobody
/// starts one by accident), FD the write end of a pipe on which it writes one message
/// and closes it: `exit N` (the program's status; `exit N ended` when the keeper ends
/// with it) or `error CODE` and a line of message (the program did not run). The program inherits every other descriptor of the parent's,
/// as it would without the keeper. Signals the parent forwards reach the keeper, which
/// forwards them to the program.
enum RunKeeper {
  /// The variable the parent sets for the keeper (`here:FD` when the run mounted the
  /// sandbox, `reused:FD` when it uses an existing mount), and the keeper for what it
  /// becomes once the program has ended (`leftovers`). Never in the program's environment.
  static let variable = "APPBOX_INTERNAL_RUN_KEEPER"

  /// What this `appbox run` process is.
  enum Role {
    /// The keeper of a run: `mountedHere` whether the run mounted the sandbox, `statusFD`
    /// the pipe to the parent.
    case keeper(mountedHere: Bool, statusFD: Int32)
    /// The keeper once the program has ended, waiting for its leftover processes.
    case leftovers
  }

  // MARK: - In the parent

  /// Starts the keeper of `plan`'s program on `mount` and waits for its word.
  /// - Returns: the program's exit status.
  /// - Throws: when the keeper cannot start, or reports that the program did not run.
  static func start(_ plan: RunPlan, mount: SandboxMount) throws(CLIError) -> Int32 {
    let pipe: ReadinessPipe
    do { pipe = try ReadinessPipe() } catch {
      throw CLIError(.osError, "cannot create a pipe for the program's keeper: \(error)")
    }
    let executable = Spawn.currentExecutable
    let arguments =
      [executable, "run"] + (plan.allowDeviceControl ? ["--allow-device-control"] : [])
      + (plan.app.map { ["--app", $0.name] } ?? []) + [mount.mountpoint, "--"] + plan.program
    var environment = ProcessInfo.processInfo.environment
    environment[variable] = (mount.mountedHere ? "here:" : "reused:") + String(pipe.writeFD)
    let keeper: pid_t
    do {
      // Forwarded signals go to the keeper (this process's child, so its pid is not reused
      // before this process has reaped it), which forwards them to the program.
      keeper = try ProgramLaunch.start(executable, arguments, environment: environment)
    } catch {
      Sys.close(pipe.writeFD)
      Sys.close(pipe.readFD)
      throw CLIError(.osError, "cannot start \(executable) to keep the program's processes: \(error)")
    }
    Sys.close(pipe.writeFD)
    var message: [UInt8] = []
    message += pipe.readLines { message += $0 + [UInt8(ascii: "\n")] }
    Sys.close(pipe.readFD)
    // The keeper stays for the program's leftovers: a signal that comes now is for this
    // process alone.
    ProgramLaunch.stopForwarding()
    let text = String(decoding: message, as: UTF8.self)
    let words = text.split(separator: "\n").first?.split(separator: " ") ?? []
    if words.count >= 2, words[0] == "exit", let status = Int32(words[1]) {
      // Nothing of the program's tree is left, and the keeper ends now: reaped here, so
      // the run (which keeps an app installed) is over when this process returns.
      if words.count == 3, words[2] == "ended" { _ = Spawn.wait(keeper) }
      return status
    }
    if text.hasPrefix("error "), let newline = text.firstIndex(of: "\n"),
      let code = Int32(text[text.index(text.startIndex, offsetBy: 6)..<newline])
    {
      throw CLIError(
        ExitCode(rawValue: code) ?? .failure,
        String(text[text.index(after: newline)...]).trimmingCharacters(in: .newlines))
    }
    // No word: it was killed before the program's end was known (a signal before the
    // program started, or a SIGKILL).
    let status = Spawn.wait(keeper)
    FileHandle.standardError.write(
      Data(
        "appbox: the program's keeper (pid \(keeper)) ended with status \(status) before the program did; the program's processes, if any are left, are no longer kept in its run\n"
          .utf8))
    return status
  }

  // MARK: - In the keeper

  /// This process's role, when it was started as a keeper (or became the keeper of the
  /// leftovers); nil for the `appbox run` a user started. Removes the variable.
  /// - Throws: when the variable is set but names no pipe (set by hand).
  static func inherited() throws(CLIError) -> Role? {
    guard let value = ProcessInfo.processInfo.environment[variable] else { return nil }
    unsetenv(variable)
    if value == "leftovers" { return .leftovers }
    let parts = value.split(separator: ":", omittingEmptySubsequences: false)
    // A descriptor that cannot be looked at is no pipe: refused like one that is not.
    guard parts.count == 2, parts[0] == "here" || parts[0] == "reused", let fd = Int32(parts[1]), fd > 2,
      let st = try? Sys.fstat(fd), st.st_mode & S_IFMT == S_IFIFO
    else {
      throw CLIError(.usage, "\(variable) is internal to appbox run: unset it")
    }
    return .keeper(mountedHere: parts[0] == "here", statusFD: fd)
  }

  /// Plays `role` for `plan` (the program, and the mount's path as MOUNTPOINT) and exits.
  static func play(_ role: Role, _ plan: RunPlan) -> Never {
    switch role {
    case .keeper(let mountedHere, let statusFD): keep(plan, mountedHere: mountedHere, statusFD: statusFD)
    case .leftovers:
      Sys.reapAllChildren()
      exit(0)
    }
  }

  /// Registers, runs the program, reports its status, then becomes the keeper of the
  /// leftovers.
  private static func keep(_ plan: RunPlan, mountedHere: Bool, statusFD: Int32) -> Never {
    do throws(Errno) { try Sys.setCloseOnExec(statusFD) } catch {
      exit(ExitCode.osError.rawValue)  // the parent reports a keeper that ended without a word
    }
    let status: Int32
    do throws(CLIError) {
      guard let mountpoint = plan.mountpoint else { throw CLIError(.usage, "the keeper needs the mountpoint") }
      do throws(Errno) {
        try ProgramLaunch.forwardSignals()
        // Orphaned descendants of the program are re-parented here, not to init: the daemon
        // sees them in the run's tree.
        try Sys.becomeChildSubreaper()
      } catch {
        throw CLIError(.osError, "cannot become the keeper of the program's processes: \(error)")
      }
      let registration = try RunRegistration.register(
        mountpoint: mountpoint, mountedHere: mountedHere, allowsControl: plan.allowDeviceControl)
      var events: String?
      if let registration {
        do { events = try EventLogDirectory.currentPath(of: registration.target) } catch {
          // A daemon that names no log (an earlier appbox's, reused): no APPBOX_EVENTS, and
          // AppBoxKit polls the device state instead, as it does outside a run.
          FileHandle.standardError.write(Data("appbox: \(error.message); APPBOX_EVENTS is not set\n".utf8))
        }
      }
      var group: Int32?
      if let app = plan.app {
        // The daemon keeps the app installed while this keeper (the program's tree) lives,
        // and makes the run's control group, which confines the program to the app's
        // containers.
        let reply: String
        do throws(CLIError) {
          reply = try ControlClient.send("app-run \(app)", to: try ControlClient.target(mountpoint))
        } catch {
          throw CLIError(error.code, "cannot run as \(app): \(error.message); the program did not run")
        }
        guard let path = ControlClient.object(reply)["cgroup"] as? String else {
          throw CLIError(
            .unavailable,
            "cannot run as \(app): the daemon of \(mountpoint) made no control group for the run (an older appbox's daemon: remount); the program did not run"
          )
        }
        do throws(Errno) { group = try Sys.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } catch {
          throw CLIError(.unavailable, "cannot open the run's control group \(path): \(error); the program did not run")
        }
      }
      status = RunCommand.runProgram(plan, root: plan.containerRoot(mountpoint), events: events, group: group)
      if let group { Sys.close(group) }
    } catch {
      ReadinessPipe.send("error \(error.code.rawValue)\n\(error.message)\n", to: statusFD)
      exit(error.code.rawValue)
    }
    // Before the parent hears the status (and exits): a pipe of the caller's that this
    // process held open would not end while leftover processes keep it here.
    Sys.ignoreHangupAndInterrupts()
    do throws(Errno) { try Sys.detachFromCaller() } catch {
      // Still attached: the caller's reader waits for the leftovers too, which loses nothing.
    }
    // Orphans of the program were re-parented here before it could be reaped: none now,
    // none later.
    let ended = !Sys.hasChildren
    ReadinessPipe.send("exit \(status)\(ended ? " ended" : "")\n", to: statusFD)
    guard !ended else { exit(0) }  // nothing left to keep: the parent reaps this process
    let failure = Sys.replaceProgram(
      Spawn.currentExecutable,
      [Spawn.currentExecutable, "run", "--keeping-the-leftovers-of", plan.mountpoint ?? "?"],
      environment: ["\(variable)=leftovers"])
    _ = failure  // Not replaced: the leftovers are kept by this program as it is.
    Sys.reapAllChildren()
    exit(0)
  }
}
