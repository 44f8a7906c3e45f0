import Foundation
import Posix
import SandboxPolicy

/// `appbox run [MOUNT OPTIONS] [MOUNTPOINT] -- PROGRAM ARGS…`: mounts a sandbox (or reuses
/// a mount), runs PROGRAM with its environment pointed into the sandbox, unmounts when it
/// mounted, and exits with the program's status.
enum RunCommand {
  static let usage = """
    usage: appbox run [MOUNT OPTIONS] [MOUNTPOINT] -- PROGRAM [ARGUMENTS...]

      Runs PROGRAM inside a sandbox and exits with its status (128+N when signal N ended it).
      MOUNTPOINT already an AppBox mount: it is used as it is. Otherwise AppBox mounts
      there (an empty directory, or --nonempty) or, without MOUNTPOINT, at a private
      temporary directory, with the mount options (appbox mount --help), and unmounts
      after the program. Without MOUNTPOINT and
      --backing the data lives in a temporary backing directory that is deleted afterwards;
      with --backing alone, a mount of yours of that backing directory is reused if there
      is one (another user's never is).
      A sandbox mounted for the run starts UNLOCKED (--bfu: before first unlock).
      The daemon refuses lock, unlock, purge and resize from PROGRAM and its descendants
      (77) unless --allow-device-control is given; your own terminal keeps control.
      SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to appbox are passed on to PROGRAM.

      The program's environment: HOME and CFFIXED_USER_HOME = the container root,
      XDG_DATA_HOME and XDG_STATE_HOME = Library/Application Support, XDG_CACHE_HOME =
      Library/Caches, XDG_CONFIG_HOME = Library/Preferences, TMPDIR = tmp,
      APPBOX_CONTAINER = the container root, APPBOX_EVENTS = the mount's event log.

      appbox run MOUNTPOINT --app BUNDLE-ID -- PROGRAM: on a device mount (appbox mount
      --device), runs PROGRAM as the installed app BUNDLE-ID: the container root above is
      its container, MOUNTPOINT/Containers/Data/Application/BUNDLE-ID. PROGRAM and all it
      starts get EPERM for any other container than the app's and its App Groups' (a
      cgroup v2 group per run: the mount's daemon must run as root, else 69). The app
      cannot be removed while the run goes on. A device mount needs --app; a plain one
      refuses it.
    """

  /// Runs the command and exits the process with the program's status: mounts (or finds
  /// the mount), has a keeper (``RunKeeper``) start the program and report its status,
  /// and unmounts what it mounted.
  static func run(_ arguments: [String]) throws(CLIError) -> Never {
    let role = try RunKeeper.inherited()
    if case .leftovers = role { RunKeeper.play(.leftovers, RunPlan.leftovers) }
    let plan = try RunPlan.parse(arguments)
    if let role { RunKeeper.play(role, plan) }
    do throws(Errno) { try ProgramLaunch.forwardSignals() } catch {
      throw CLIError(.osError, "cannot install signal handlers: \(error)")
    }
    let mount = try SandboxMount.prepare(plan)
    let status: Int32
    do throws(CLIError) { status = try RunKeeper.start(plan, mount: mount) } catch {
      mount.finish()
      throw error
    }
    mount.finish()
    exit(status)
  }

  /// Starts the program and waits for it; 127 when it is not found, 126 when it cannot be
  /// run, as a shell answers.
  /// - Parameter group: on a device, an open descriptor of the run's control group, which
  ///   the program starts in (docs/architecture.md#app-confinement).
  static func runProgram(_ plan: RunPlan, root: String, events: String?, group: Int32? = nil) -> Int32 {
    var environment = SandboxEnvironment.variables(root: root, base: ProcessInfo.processInfo.environment)
    environment[RunKeeper.variable] = nil
    environment["APPBOX_DEVICE_CONTROL"] = plan.allowDeviceControl ? Spawn.currentExecutable : nil
    environment["APPBOX_EVENTS"] = events
    let pid: pid_t
    do {
      if let group {
        pid = try ControlGroups.start(plan.program[0], plan.program, environment: environment, in: group)
      } else {
        pid = try ProgramLaunch.start(plan.program[0], plan.program, environment: environment)
      }
    } catch  where group != nil && (error == .accessDenied || error == .notPermitted || error == .notImplemented) {
      let why =
        error == .notImplemented
        ? "clone3 is not available here (a seccomp filter: a container needs CAP_SYS_ADMIN)" : "it needs root"
      FileHandle.standardError.write(
        Data(
          "appbox: cannot start \(plan.program[0]) in its run's control group (\(error)): app confinement: \(why); the program did not run\n"
            .utf8))
      return 126
    } catch {
      let notFound = error == .noEntry || error == .notDirectory
      let reason = notFound ? "command not found" : "\(error)"
      FileHandle.standardError.write(Data("appbox: \(plan.program[0]): \(reason)\n".utf8))
      return notFound ? 127 : 126
    }
    return ProgramLaunch.wait(pid)
  }
}

/// What `appbox run` was asked to do.
struct RunPlan {
  /// The plan of the keeper of a run's leftovers: nothing more to start.
  static let leftovers = RunPlan(mountOptions: [], settings: [], mountpoint: nil, backing: nil, program: [])

  /// `appbox mount`'s options, as given (validated).
  var mountOptions: [String]
  /// The options that set up a new mount (all but `--backing`), as given: a mount that is
  /// reused keeps its own.
  var settings: [String]
  /// The mountpoint given, if any.
  var mountpoint: String?
  /// The backing directory given, if any.
  var backing: String?
  /// The program and its arguments.
  var program: [String]
  /// Whether the program may lock, unlock, purge and resize (`--allow-device-control`).
  var allowDeviceControl = false
  /// On a device mount, the app the program runs as (`--app BUNDLE-ID`).
  var app: ContainerIdentifier?

  /// Parses the arguments after `run`; the mount options are checked by `appbox mount`'s
  /// own parser.
  static func parse(_ arguments: [String]) throws(CLIError) -> RunPlan {
    if let first = arguments.first, first == "--help" || first == "-h" { throw CLIError(.success, RunCommand.usage) }
    guard let separator = arguments.firstIndex(of: "--") else {
      throw CLIError(.usage, "missing -- before the program")
    }
    var options = Array(arguments[..<separator])
    let allowDeviceControl = options.contains("--allow-device-control")
    options.removeAll { $0 == "--allow-device-control" }
    var app: ContainerIdentifier?
    if let flag = options.firstIndex(of: "--app") {
      guard flag + 1 < options.count else { throw CLIError(.usage, "--app needs a bundle id") }
      do throws(ContainerIdentifier.Problem) { app = try ContainerIdentifier(validating: options[flag + 1]) } catch {
        throw CLIError(.badValue, "--app \(options[flag + 1]): \(error)")
      }
      options.removeSubrange(flag...(flag + 1))
      if options.contains("--app") { throw CLIError(.usage, "--app given twice") }
    }
    let program = Array(arguments[(separator + 1)...])
    guard let name = program.first, !name.isEmpty else {
      throw CLIError(.usage, "missing PROGRAM after --")
    }
    for flag in ["--foreground", "-f", "--fstab", "--ready-fd", "--help", "-h"] where options.contains(flag) {
      throw CLIError(.usage, "\(flag) does not apply to appbox run")
    }
    // The mount parser wants exactly one MOUNTPOINT: as given, or a stand-in.
    let request: MountRequest
    var mountpoint: String?
    do throws(CLIError) {
      request = try MountRequest.parse(options + ["/"])
    } catch {
      request = try MountRequest.parse(options)
      mountpoint = request.mountpoint
      options = withoutPositional(options)
    }
    var settings = options
    if let backing = settings.firstIndex(of: "--backing") { settings.removeSubrange(backing...(backing + 1)) }
    settings.removeAll { $0.hasPrefix("--backing=") }
    if app != nil, mountpoint == nil {
      throw CLIError(.usage, "--app needs the MOUNTPOINT of a device mount (appbox mount --device)")
    }
    return RunPlan(
      mountOptions: options, settings: settings, mountpoint: mountpoint,
      backing: request.backing, program: program, allowDeviceControl: allowDeviceControl, app: app)
  }
}

extension RunPlan {
  /// The container the program runs in, on the mount at `mountpoint`: the mount's root,
  /// or on a device the app's container.
  func containerRoot(_ mountpoint: String) -> String {
    guard let app else { return mountpoint }
    return mountpoint + "/"
      + DeviceLayout.components(of: .app, app).map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
  }

  /// `appbox mount`'s options that take a value (the value is not the MOUNTPOINT).
  static let valueOptions = MountOptions.flagsWithValue

  /// The mount options without their one positional argument (the MOUNTPOINT).
  static func withoutPositional(_ options: [String]) -> [String] {
    var index = 0
    while index < options.count {
      let option = options[index]
      if valueOptions.contains(option) {
        index += 2
      } else if option.hasPrefix("-") && option != "-" {
        index += 1
      } else {
        var rest = options
        rest.remove(at: index)
        return rest
      }
    }
    return options
  }
}

/// The mount a run uses: one that was already there, or one it made (and takes down).
struct SandboxMount {
  /// The mount's root.
  let mountpoint: String
  /// Whether this run mounted it (and so unmounts it).
  let mountedHere: Bool
  /// A temporary directory this run made (removed after the unmount), if any.
  let temporaryDirectory: String?

  /// Finds or makes the mount `plan` asks for.
  static func prepare(_ plan: RunPlan) throws(CLIError) -> SandboxMount {
    if let given = plan.mountpoint {
      let path: String
      do { path = try Sys.realpath(given) } catch {
        guard error == .noEntry else { throw CLIError(.noInput, "mountpoint \(given): \(error)") }
        throw CLIError(.noInput, "mountpoint \(given) does not exist: create it first (mkdir -p \(given))")
      }
      // Another FUSE filesystem there is busy; other mounts (a volume) are mounted over.
      if let mount = try MountTable.mount(at: path), mount.type == "fuse" || mount.type.hasPrefix("fuse.") {
        guard mount.isAppBox else {
          throw CLIError(.busy, "\(path) is already mounted (\(mount.type)) and is not an AppBox sandbox")
        }
        if let backing = plan.backing {
          // What another user's daemon says it serves proves nothing: only the caller's own
          // mounts are checked against --backing.
          guard let owner = mount.ownerUID, owner == Sys.effectiveUID else {
            throw CLIError(
              .noPermission,
              "\(path) is the AppBox mount of uid \(mount.ownerUID.map(String.init) ?? "?"), whose backing directory cannot be confirmed: --backing is checked only against your own mounts"
            )
          }
          if let serving = Self.backing(of: path), serving != Self.resolved(backing) {
            throw CLIError(.busy, "\(path) is an AppBox mount of \(serving), not of \(backing)")
          }
        }
        return try reused(path, plan)
      }
      if let app = plan.app {
        throw CLIError(
          .noInput, "--app \(app): \(path) is not mounted; mount a device there first (appbox mount --device)")
      }
      try mount(plan.mountOptions, at: path, backing: nil)
      let mounted = SandboxMount(mountpoint: path, mountedHere: true, temporaryDirectory: nil)
      do throws(CLIError) { try mounted.checkKind(for: plan) } catch {
        mounted.finish()
        throw error
      }
      return mounted
    }
    if let backing = plan.backing, let existing = try Self.mount(serving: Self.resolved(backing)) {
      return try reused(existing, plan)
    }
    let directory = try makeTemporaryDirectory()
    let mountpoint = directory + "/container"
    var backing: String?
    do {
      try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: false)
      if plan.backing == nil {
        backing = directory + "/backing"
        try FileManager.default.createDirectory(atPath: backing!, withIntermediateDirectories: false)
      }
    } catch {
      removeTemporary(directory)
      throw CLIError(.osError, "cannot prepare \(directory): \(error.localizedDescription)")
    }
    do throws(CLIError) { try mount(plan.mountOptions, at: mountpoint, backing: backing) } catch {
      removeTemporary(directory)
      throw error
    }
    let mounted = SandboxMount(mountpoint: mountpoint, mountedHere: true, temporaryDirectory: directory)
    do throws(CLIError) { try mounted.checkKind(for: plan) } catch {
      mounted.finish()
      throw error
    }
    return mounted
  }

  /// An existing mount, used as it is (saying so when mount options were given).
  static func reused(_ mountpoint: String, _ plan: RunPlan) throws(CLIError) -> SandboxMount {
    let mount = SandboxMount(mountpoint: mountpoint, mountedHere: false, temporaryDirectory: nil)
    try mount.checkKind(for: plan)
    if !plan.settings.isEmpty {
      FileHandle.standardError.write(
        Data(
          "appbox: using the mount at \(mountpoint) as it is; not applied: \(plan.settings.joined(separator: " "))\n"
            .utf8))
    }
    return mount
  }

  /// Refuses `--app` on a plain mount, a device mount without it, and an app that is not
  /// installed; a mount whose daemon does not answer us (another user's, a sidecar's) is
  /// taken as plain.
  func checkKind(for plan: RunPlan) throws(CLIError) {
    // Absent is the meaning: a daemon that does not answer us is not ours to ask (below).
    guard let target = try? ControlClient.target(mountpoint), let reply = try? ControlClient.send("status", to: target),
      let status = ControlClient.object(reply)["status"] as? [String: Any]
    else {
      // Not ours to ask: only a plain mount can be run without --app.
      if let app = plan.app {
        throw CLIError(.noInput, "--app \(app): cannot ask the daemon of \(mountpoint) about its apps")
      }
      return
    }
    let isDevice = status["device"] as? Bool ?? false
    guard let app = plan.app else {
      if isDevice {
        throw CLIError(
          .noInput,
          "\(mountpoint) is a device mount: give --app BUNDLE-ID to run the program as one of its apps (appbox app list \(mountpoint))"
        )
      }
      return
    }
    guard isDevice else {
      throw CLIError(.noInput, "--app \(app): \(mountpoint) is not a device mount (appbox mount --device)")
    }
    let installed = (status["containers"] as? [[String: Any]] ?? []).contains {
      $0["kind"] as? String == "app" && $0["id"] as? String == app.name
    }
    guard installed else {
      throw CLIError(
        .noInput, "--app \(app): no such app is installed on \(mountpoint) (appbox app install \(mountpoint) \(app))")
    }
  }

  /// Unmounts what this run mounted and removes its temporary directory (with the
  /// temporary backing directory in it). A mount still in use (a program left running in
  /// the background) is detached lazily and its directory kept.
  func finish() {
    guard mountedHere else { return }
    do throws(CLIError) {
      _ = try UnmountCommand.run([mountpoint])
    } catch {
      FileHandle.standardError.write(
        Data(
          "appbox: \(error.message); detaching it lazily, the data stays in \(temporaryDirectory ?? "its backing directory")\n"
            .utf8))
      do throws(CLIError) { _ = try UnmountCommand.run(["--lazy", mountpoint]) } catch {
        FileHandle.standardError.write(Data("appbox: \(error.message); \(mountpoint) stays mounted\n".utf8))
      }
      return
    }
    if let temporaryDirectory { Self.removeTemporary(temporaryDirectory) }
  }

  /// Mounts through `appbox mount` (same binary), which reports its own errors; its exit
  /// code becomes this run's.
  static func mount(_ options: [String], at mountpoint: String, backing: String?) throws(CLIError) {
    let arguments =
      [Spawn.currentExecutable, "mount"] + (backing.map { ["--backing", $0] } ?? []) + options + [mountpoint]
    let status = Spawn.run(arguments[0], arguments)
    guard status == 0 else {
      throw CLIError(ExitCode(rawValue: status) ?? .failure, "the sandbox was not mounted; the program did not run")
    }
  }

  /// A new private (0700) directory for a mountpoint and a temporary backing directory.
  static func makeTemporaryDirectory() throws(CLIError) -> String {
    let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
    do { return try Sys.makeTemporaryDirectory(prefix: "\(base)/appbox-run-") } catch {
      throw CLIError(.osError, "cannot create a temporary directory in \(base): \(error)")
    }
  }

  static func removeTemporary(_ directory: String) {
    do { try FileManager.default.removeItem(atPath: directory) } catch {
      FileHandle.standardError.write(
        Data("appbox: could not remove \(directory): \(error.localizedDescription)\n".utf8))
    }
  }

  /// `path` resolved, or as given when it does not exist.
  static func resolved(_ path: String) -> String {
    (try? Sys.realpath(path)) ?? path  // absent is the meaning: nothing to resolve it to
  }

  /// The backing directory of the AppBox mount at `mountpoint`, if its daemon answers us.
  static func backing(of mountpoint: String) -> String? {
    // Absent is the meaning: a mount whose daemon does not answer us has no backing we know.
    guard let target = try? ControlClient.target(mountpoint), let reply = try? ControlClient.send("status", to: target)
    else { return nil }
    return (ControlClient.object(reply)["status"] as? [String: Any])?["backing"] as? String
  }

  /// The mountpoint of an AppBox mount of `backing` of the caller's own, if any: the mount
  /// table names the caller as its owner (`user_id=`, set by the kernel) and its daemon,
  /// verified as the caller's (``ControlClient``), says it serves `backing`. Another
  /// user's mount is never reused, whatever its daemon says (for root too: that daemon is
  /// the other user's program).
  static func mount(serving backing: String) throws(CLIError) -> String? {
    let me = Sys.effectiveUID
    return try MountTable.mounts().filter { $0.isAppBox && $0.ownerUID == me }.map(\.mountpoint).first {
      Self.backing(of: $0) == backing
    }
  }
}

/// The environment that points a program into the sandbox (docs/reference.md#appbox-run-and-appboxkit: what Swift's
/// Foundation on Linux reads, and the XDG variables other programs read).
enum SandboxEnvironment {
  /// `base` with the sandbox's variables set for the container at `root`.
  static func variables(root: String, base: [String: String]) -> [String: String] {
    var environment = base
    let applicationSupport = root + "/Library/Application Support"
    environment["APPBOX_CONTAINER"] = root
    environment["HOME"] = root
    environment["CFFIXED_USER_HOME"] = root
    environment["XDG_DATA_HOME"] = applicationSupport
    environment["XDG_STATE_HOME"] = applicationSupport
    environment["XDG_CACHE_HOME"] = root + "/Library/Caches"
    environment["XDG_CONFIG_HOME"] = root + "/Library/Preferences"
    environment["TMPDIR"] = root + "/tmp"
    return environment
  }
}
