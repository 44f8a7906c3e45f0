import AppBoxReport
import Foundation
import Posix
import SandboxPolicy

/// `appbox experiment --capacities LIST [--runs N] [--template DIR] [--output FILE.html]
/// [--events-dir DIR] [MOUNT OPTIONS] -- PROGRAM ARGS…`: runs a program under `appbox run`
/// once per capacity and run, each on a fresh copy of a template sandbox, and compares
/// what the purges cost it. With `--app BUNDLE-ID=COMMAND` (several), each run is a
/// device: one program per app, all at once, and whose caches paid for whose writes.
enum ExperimentCommand {
  static let usage = """
    usage: appbox experiment --capacities SIZE,SIZE,... [--runs N] [--template DIR]
                             [--purge-policies POLICY,...] [--output FILE.html]
                             [--events-dir DIR] [MOUNT OPTIONS] -- PROGRAM [ARGUMENTS...]
           appbox experiment --capacities SIZE,SIZE,... [OPTIONS]
                             --app BUNDLE-ID=COMMAND [--app BUNDLE-ID=COMMAND]... [--group GROUP-ID]...

      Runs PROGRAM as appbox run does, once per capacity and run (--runs, default 1),
      each time in a new sandbox: a copy of --template (a backing directory, copied with
      cp -a) or an empty one. Prints a table of capacity against bytes purged, purge
      cost (purged names the program created again, or looked up, missed and never
      created again; each once), bytes re-created, ENOSPC, exit status and run time
      (medians over the runs), all read from each run's event log. --output writes an
      HTML page with the curve of purge cost against capacity; --events-dir keeps each
      run's event log (CAPACITY-RUN.jsonl). --purge-policies lru,fifo,largest repeats
      the sweep once per policy (appbox mount --purge-policy), one row and one curve
      each (logs CAPACITY-POLICY-RUN.jsonl). Other options are appbox mount's (not
      --capacity, --backing, --foreground). Exits 0 once every run is done, whatever
      the program's statuses (the table shows them).

      With --app, each run is a device (appbox mount --device): every app is installed
      (a member of each --group), and its COMMAND (run by /bin/sh -c) starts as that app
      (appbox run MOUNT --app BUNDLE-ID), all at once; the run ends when the last one has.
      A second table shows, per container, what was purged from it, how much of that paid
      for other apps' writes, what other caches paid for its writes, and its purge cost;
      the page adds who paid for whom.
    """

  /// The most runs at one capacity, and the most capacities.
  static let maximumRuns = 1000
  static let maximumCapacities = 100

  /// What to run.
  struct Plan {
    var capacities: [Int64] = []
    /// The purge policies compared (empty: the mount's default, no policy column).
    var policies: [PurgePolicy] = []
    var runs = 1
    var template: String?
    var output: String?
    var eventsDirectory: String?
    var mountOptions: [String] = []
    var program: [String] = []
    /// A device's apps and their commands (`--app`), in order.
    var apps: [(id: ContainerIdentifier, command: String)] = []
    /// The groups every app is a member of (`--group`).
    var groups: [ContainerIdentifier] = []

    /// What the table and page name the experiment by.
    var title: [String] {
      apps.isEmpty ? program : apps.map { "\($0.id)=\($0.command)" }
    }
  }

  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    let plan = try parse(arguments)
    do throws(Errno) { try ProgramLaunch.forwardSignals() } catch {
      throw CLIError(.osError, "cannot install signal handlers: \(error)")
    }
    let policies: [PurgePolicy?] = plan.policies.isEmpty ? [nil] : plan.policies
    let total = policies.count * plan.capacities.count * plan.runs
    let progress = isatty(2) == 1
    var results: [ExperimentRun] = []
    sweep: for policy in policies {
      for capacity in plan.capacities {
        for run in 1...plan.runs {
          if progress {
            let step = results.count + 1
            let label = ByteCount(capacity).formatted + (policy.map { " \($0.rawValue)" } ?? "")
            FileHandle.standardError.write(
              Data("appbox experiment: [\(step)/\(total)] \(label), run \(run) of \(plan.runs)\n".utf8))
          }
          let result = try runOnce(plan, capacity: capacity, policy: policy, run: run)
          results.append(result)
          if progress {
            FileHandle.standardError.write(
              Data(
                "appbox experiment:   exit \(result.exitStatus) in \(Statistics.seconds(result.seconds)), purged \(ByteCount(result.summary.bytesPurged).formatted), purge cost \(result.summary.purgeCost)\n"
                  .utf8))
          }
          // Ctrl-C or SIGTERM ended the program: stop the sweep, report what ran.
          if result.exitStatus == 128 + SIGINT || result.exitStatus == 128 + SIGTERM { break sweep }
        }
      }
    }
    let rows = ExperimentRow.rows(results)
    if let output = plan.output {
      try ReportCommand.write(ExperimentPage.html(rows, command: plan.title), to: output)
    }
    print(ExperimentTable.text(rows))
    if !plan.apps.isEmpty {
      print("")
      print(ExperimentTable.containersText(rows))
    }
    if let output = plan.output { print("report: \(output)") }
    return .success
  }

  /// Runs the program once in a new sandbox of `capacity` and reads the run's event log.
  static func runOnce(_ plan: Plan, capacity: Int64, policy: PurgePolicy?, run: Int) throws(CLIError)
    -> ExperimentRun
  {
    let directory = try SandboxMount.makeTemporaryDirectory()
    let mountpoint = directory + "/container"
    let backing = directory + "/backing"
    do {
      try Sys.mkdir(mountpoint, 0o755)
      try Sys.mkdir(backing, 0o700)
    } catch {
      SandboxMount.removeTemporary(directory)
      throw CLIError(.osError, "cannot prepare \(directory): \(error)")
    }
    if let template = plan.template, Spawn.run("/bin/cp", ["cp", "-a", "--", template + "/.", backing]) != 0 {
      SandboxMount.removeTemporary(directory)
      throw CLIError(.noInput, "cannot copy the template \(template) (see cp's message above)")
    }
    do throws(CLIError) {
      try SandboxMount.mount(
        plan.mountOptions + ["--capacity", "\(capacity)"] + (policy.map { ["--purge-policy", $0.rawValue] } ?? [])
          + (plan.apps.isEmpty ? [] : ["--device"]),
        at: mountpoint, backing: backing)
    } catch {
      SandboxMount.removeTemporary(directory)
      throw error
    }
    let files = try RuntimeDirectory.current().files(for: SandboxMount.resolved(mountpoint))
    let logs = EventLogDirectory(files, owner: Sys.effectiveUID)
    let sandbox = SandboxMount(mountpoint: mountpoint, mountedHere: true, temporaryDirectory: directory)
    let id: String
    do throws(CLIError) { id = try EventLogDirectory.currentID(of: try ControlClient.target(mountpoint)) } catch {
      sandbox.finish()
      throw error
    }
    let start = Clock.monotonic()
    let status: Int32
    var statuses: [(String, Int32)] = []
    do throws(CLIError) {
      if plan.apps.isEmpty {
        // As `appbox run MOUNTPOINT` does: a keeper registers the run with the daemon, which
        // refuses device control (lock, purge, resize) from the program's tree.
        let runPlan = RunPlan(
          mountOptions: [], settings: [], mountpoint: mountpoint, backing: backing, program: plan.program)
        status = try RunKeeper.start(
          runPlan, mount: SandboxMount(mountpoint: mountpoint, mountedHere: false, temporaryDirectory: nil))
      } else {
        statuses = try runApps(plan, on: mountpoint)
        status = statuses.map(\.1).first { $0 != 0 } ?? 0
      }
    } catch {
      sandbox.finish()
      throw error
    }
    let seconds = Clock.monotonic() - start
    sandbox.finish()
    // The daemon has exited (unmount waits for it): its log is complete.
    let bytes = try logs.read(id)
    if let kept = plan.eventsDirectory {
      let size = ByteCount(capacity).formatted.replacingOccurrences(of: " ", with: "")
      let path = kept + "/\(size)-" + (policy.map { "\($0.rawValue)-" } ?? "") + "\(run).jsonl"
      do { try Sys.replaceFile(path, with: bytes, mode: 0o644) } catch {
        throw CLIError(.noInput, "cannot write \(path): \(error)")
      }
    }
    // The mountpoint was the run's own: its logs go with it.
    logs.removeAll()
    removeIfEmpty(files)
    let parsed = EventLogParser.parse(bytes)
    var result = ExperimentRun(
      capacity: capacity, policy: policy?.rawValue, run: run, exitStatus: status, seconds: seconds,
      summary: ReportSummary(parsed.events))
    result.appStatuses = statuses
    return result
  }

  /// Installs the plan's apps on the device at `mountpoint` (those a template did not
  /// bring), then runs every app's command at once, each as its app, and waits for all.
  /// - Returns: each app's exit status, in order.
  static func runApps(_ plan: Plan, on mountpoint: String) throws(CLIError) -> [(String, Int32)] {
    let target = try ControlClient.target(mountpoint)
    let listed = ControlClient.object(try ControlClient.send("app-list", to: target))
    let installed = Set(
      ((listed["status"] as? [String: Any])?["containers"] as? [[String: Any]] ?? []).compactMap {
        $0["kind"] as? String == "app" ? $0["id"] as? String : nil
      })
    for app in plan.apps where !installed.contains(app.id.name) {
      _ = try ControlClient.send(
        "app-install " + ([app.id] + plan.groups).map(\.name).joined(separator: " "), to: target)
    }
    var started: [(String, pid_t)] = []
    for app in plan.apps {
      let arguments = [
        Spawn.currentExecutable, "run", mountpoint, "--app", app.id.name, "--", "/bin/sh", "-c", app.command,
      ]
      do throws(Errno) { started.append((app.id.name, try Spawn.start(arguments[0], arguments))) } catch {
        for (_, pid) in started { _ = Spawn.wait(pid) }
        throw CLIError(.osError, "cannot start appbox run for \(app.id): \(error)")
      }
    }
    return started.map { ($0.0, Spawn.wait($0.1)) }
  }

  /// Parses the arguments after `experiment`.
  static func parse(_ arguments: [String]) throws(CLIError) -> Plan {
    if arguments.first == "--help" || arguments.first == "-h" { throw CLIError(.success, usage) }
    var plan = Plan()
    let separator = arguments.firstIndex(of: "--")
    if let separator {
      plan.program = Array(arguments[(separator + 1)...])
      guard let name = plan.program.first, !name.isEmpty else {
        throw CLIError(.usage, "missing PROGRAM after --")
      }
    }
    var reader = ArgumentReader(Array(arguments[..<(separator ?? arguments.endIndex)]))
    var capacitiesGiven = false
    while let argument = reader.next() {
      switch argument {
      case "--capacities":
        capacitiesGiven = true
        plan.capacities = try capacities(try reader.value())
      case "--runs":
        let text = try reader.value()
        guard let runs = Int(text), runs >= 1, runs <= maximumRuns else {
          throw CLIError(.badValue, "--runs \(text): not a number of runs from 1 to \(maximumRuns)")
        }
        plan.runs = runs
      case "--purge-policies":
        let text = try reader.value()
        plan.policies = []
        for name in text.split(separator: ",", omittingEmptySubsequences: false) {
          guard let policy = PurgePolicy(parsing: String(name)), !plan.policies.contains(policy) else {
            throw CLIError(
              .badValue, "--purge-policies \(text): \(name) is not one of \(PurgePolicy.names), or is given twice")
          }
          plan.policies.append(policy)
        }
      case "--template": plan.template = try directory("--template", try reader.value())
      case "--events-dir": plan.eventsDirectory = try directory("--events-dir", try reader.value())
      case "--output": plan.output = try reader.value()
      case "--app":
        let text = try reader.value()
        guard let equals = text.firstIndex(of: "="), !text[text.index(after: equals)...].isEmpty else {
          throw CLIError(.usage, "--app \(text): give BUNDLE-ID=COMMAND")
        }
        let id = try AppCommand.identifier(String(text[..<equals]), what: "--app")
        guard !plan.apps.contains(where: { $0.id == id }) else {
          throw CLIError(.badValue, "--app \(id) is given twice")
        }
        plan.apps.append((id, String(text[text.index(after: equals)...])))
      case "--group": plan.groups.append(try AppCommand.identifier(try reader.value(), what: "--group"))
      case "--capacity", "--backing", "--foreground", "-f", "--ready-fd", "--help", "-h":
        throw CLIError(.usage, "\(argument) does not apply to appbox experiment")
      default:
        plan.mountOptions.append(argument)
        if RunPlan.valueOptions.contains(argument) { plan.mountOptions.append(try reader.value()) }
      }
    }
    guard capacitiesGiven else { throw CLIError(.usage, "--capacities is missing") }
    switch (plan.apps.isEmpty, separator == nil) {
    case (true, true): throw CLIError(.usage, "missing -- before the program (or --app BUNDLE-ID=COMMAND)")
    case (false, false): throw CLIError(.usage, "--app runs each app's COMMAND: give no -- PROGRAM")
    default: break
    }
    if plan.apps.isEmpty, !plan.groups.isEmpty { throw CLIError(.usage, "--group needs --app") }
    if let app = plan.apps.first(where: { plan.groups.contains($0.id) }) {
      throw CLIError(.badValue, "--group \(app.id) is one of the apps' bundle ids")
    }
    if plan.mountOptions.contains("--device") { throw CLIError(.usage, "--device: --app makes each run a device") }
    if !plan.policies.isEmpty && plan.mountOptions.contains("--purge-policy") {
      throw CLIError(.usage, "--purge-policy and --purge-policies: give one of them")
    }
    _ = try MountRequest.parse(plan.mountOptions + ["/"])  // the mount options, checked now
    return plan
  }

  /// The capacities of `--capacities`: sizes separated by commas, each checked as
  /// `--capacity` is, no repeats.
  static func capacities(_ text: String) throws(CLIError) -> [Int64] {
    var result: [Int64] = []
    for item in text.split(separator: ",", omittingEmptySubsequences: false) {
      let capacity = try PressureCommands.checkedCapacity(
        String(item).trimmingCharacters(in: .whitespaces), option: "--capacities \(text):")
      guard !result.contains(capacity) else {
        throw CLIError(.badValue, "--capacities \(text): \(item) is given twice")
      }
      result.append(capacity)
    }
    guard result.count <= maximumCapacities else {
      throw CLIError(.badValue, "--capacities \(text): at most \(maximumCapacities) capacities")
    }
    return result
  }

  /// A directory option's value: an existing directory.
  static func directory(_ flag: String, _ path: String) throws(CLIError) -> String {
    let st: stat
    do { st = try Sys.statPath(path) } catch { throw CLIError(.noInput, "\(flag) \(path): not a directory (\(error))") }
    guard st.st_mode & S_IFMT == S_IFDIR else { throw CLIError(.noInput, "\(flag) \(path): not a directory") }
    return path
  }

  /// Removes the daemon's log of a run when it wrote nothing (it explains failures),
  /// through the runtime directory's descriptor.
  static func removeIfEmpty(_ files: MountFiles) {
    do throws(Errno) {
      guard try Sys.fstatat(files.directory.fd, files.logName, AT_SYMLINK_NOFOLLOW).st_size == 0 else { return }
      try files.remove(files.logName)
    } catch {
      // Absent (the daemon wrote none) or not removable: nothing to tidy.
    }
  }
}
