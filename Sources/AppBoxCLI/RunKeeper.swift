import Foundation
import Posix

/// The process of `appbox run` that keeps the program's tree: a child of the `appbox run`
/// the user started, it becomes a child subreaper, registers as the run with the mount's
/// daemon (``RunRegistration``), starts the program, and reports the program's exit
/// status to its parent, which exits with it. Then it lets go of its caller's standard
/// descriptors and working directory and stays until the last process of the tree has
/// ended: orphans are re-parented to it, never out of the tree, so every process the
/// program left behind, and everything those start later, stays under the run's rule
/// for as long as it runs, with nothing for the daemon to record when the program ends.
///
/// The parent starts it as `appbox run [--allow-device-control] MOUNTPOINT -- PROGRAM…`
/// with ``variable`` set (no command-line option: a user cannot start one by accident)
/// and a pipe as descriptor 3, on which it writes one message and closes it: `exit N`
/// (the program's status) or `error CODE` and a line of message (the program did not
/// run). Signals the parent forwards reach it, and it forwards them to the program.
enum RunKeeper {
  /// The variable the parent sets: `here` when the run mounted the sandbox, `reused` when
  /// it uses an existing mount. Removed from the program's environment.
  static let variable = "APPBOX_INTERNAL_RUN_KEEPER"
  /// The descriptor of the pipe to the parent.
  static let descriptor: Int32 = 3

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
      [executable, "run"] + (plan.allowDeviceControl ? ["--allow-device-control"] : []) + [mount.mountpoint, "--"]
      + plan.program
    var environment = ProcessInfo.processInfo.environment
    environment[variable] = mount.mountedHere ? "here" : "reused"
    let keeper: pid_t
    do {
      // Forwarded signals go to the keeper (this process's child, so its pid is not reused
      // before this process has reaped it), which forwards them to the program.
      keeper = try ProgramLaunch.start(executable, arguments, environment: environment, passing: pipe.writeFD)
    } catch {
      Sys.close(pipe.writeFD)
      Sys.close(pipe.readFD)
      throw CLIError(.osError, "cannot start \(executable) to keep the program's processes: \(error)")
    }
    Sys.close(pipe.writeFD)
    var message: [UInt8] = []
    message += pipe.readLines { message += $0 + [UInt8(ascii: "\n")] }
    Sys.close(pipe.readFD)
    let text = String(decoding: message, as: UTF8.self)
    if text.hasPrefix("exit "), let status = Int32(text.dropFirst(5).trimmingCharacters(in: .newlines)) {
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

  /// Nil unless this process was started as a keeper; then whether its run mounted the
  /// sandbox. Removes the variable.
  /// - Throws: when the variable is set without the pipe (set by hand).
  static func inherited() throws(CLIError) -> Bool? {
    guard let value = ProcessInfo.processInfo.environment[variable] else { return nil }
    unsetenv(variable)
    let st: stat
    do { st = try Sys.fstat(descriptor) } catch {
      throw CLIError(.usage, "\(variable) is internal to appbox run: unset it")
    }
    guard value == "here" || value == "reused", st.st_mode & S_IFMT == S_IFIFO else {
      throw CLIError(.usage, "\(variable) is internal to appbox run: unset it")
    }
    return value == "here"
  }

  /// Runs the keeper for `plan` (the program and the mount's path as MOUNTPOINT) and exits.
  static func run(_ plan: RunPlan, mountedHere: Bool) -> Never {
    do throws(Errno) { try Sys.setCloseOnExec(descriptor) } catch {
      exit(ExitCode.osError.rawValue)  // no pipe to report on: the parent reports the status
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
      status = RunCommand.runProgram(plan, root: mountpoint, events: registration?.target.files.events)
    } catch {
      ReadinessPipe.send("error \(error.code.rawValue)\n\(error.message)\n", to: descriptor)
      exit(error.code.rawValue)
    }
    // Before the parent hears the status (and exits): a pipe of the caller's that this
    // process held open would not end while leftover processes keep it here.
    do throws(Errno) { try Sys.detachFromCaller() } catch {
      // Kept: the caller's reader waits for the leftovers too, which loses nothing.
    }
    ReadinessPipe.send("exit \(status)\n", to: descriptor)
    Sys.reapAllChildren()
    exit(0)
  }
}
