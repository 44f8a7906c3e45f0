import FilesystemInterface
import Foundation
import Posix
import SandboxPolicy

/// Names a user may give for a protection class, for messages.
enum ProtectionClassNames {
  static let help =
    "one of complete, completeUnlessOpen, completeUntilFirstUserAuthentication, completeWhenUserInactive, none; NSFileProtection… names, letters A B C CX D or Apple's numbers 1 2 3 7 4"
}

/// `appbox lock|unlock|status|purge|events|protect` (`events` in EventsCommand.swift).
enum ControlCommands {
  /// `appbox lock MOUNTPOINT` and `appbox unlock MOUNTPOINT`.
  static func lockOrUnlock(_ verb: String, _ arguments: [String]) throws(CLIError) -> ExitCode {
    let mountpoint = try single(arguments, usage: "usage: appbox \(verb) MOUNTPOINT")
    let reply = try ControlClient.send(verb, to: try ControlClient.target(mountpoint))
    print(ControlClient.object(reply)["state"] as? String ?? reply)
    return .success
  }

  /// `appbox status MOUNTPOINT [--json | --descriptors]`.
  static func status(_ arguments: [String]) throws(CLIError) -> ExitCode {
    let usage = "usage: appbox status [--json | --descriptors] MOUNTPOINT"
    let json = arguments.contains("--json")
    let descriptors = arguments.contains("--descriptors")
    if json && descriptors { throw CLIError(.usage, "--json and --descriptors: give one of them") }
    let mountpoint = try single(arguments.filter { $0 != "--json" && $0 != "--descriptors" }, usage: usage)
    if descriptors { return try printDescriptors(of: mountpoint) }
    let reply = try ControlClient.send("status", to: try ControlClient.target(mountpoint))
    guard let status = ControlClient.object(reply)["status"] as? [String: Any],
      let start = reply.range(of: "\"status\":")?.upperBound, reply.hasSuffix("}")
    else {
      throw CLIError(.failure, "the daemon's reply has no status: \(reply.prefix(200))")
    }
    if json {
      print(String(reply[start..<reply.index(before: reply.endIndex)]))
      return .success
    }
    print(StatusText.render(status, mountpoint: mountpoint))
    return .success
  }

  /// `appbox status --descriptors MOUNTPOINT`: the daemon's open descriptors as one line of
  /// JSON, `{"descriptors":[{"fd","target","pathOnly"}…],"inodeReferences":N}` (`O_PATH`
  /// inode references are counted, and listed only when their file was unlinked).
  static func printDescriptors(of mountpoint: String) throws(CLIError) -> ExitCode {
    let reply = try ControlClient.send("descriptors", to: try ControlClient.target(mountpoint))
    let prefix = "{\"ok\":true,"
    guard ControlClient.object(reply)["descriptors"] is [Any], reply.hasPrefix(prefix) else {
      throw CLIError(.failure, "the daemon's reply has no descriptors: \(reply.prefix(200))")
    }
    print("{" + reply.dropFirst(prefix.count))
    return .success
  }

  /// `appbox purge MOUNTPOINT (--bytes SIZE | --domain caches|tmp --all | --older-than DURATION [--domain D])`.
  static func purge(_ arguments: [String]) throws(CLIError) -> ExitCode {
    let usage =
      "usage: appbox purge MOUNTPOINT (--bytes SIZE | --domain caches|tmp --all | --older-than DURATION [--domain caches|tmp])"
    var bytes: Int64?
    var domain: String?
    var all = false
    var olderThan: Double?
    var positional: [String] = []
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
      switch argument {
      case "--bytes":
        let text = try reader.value()
        do { bytes = try ByteCount.parse(text).bytes } catch { throw CLIError(.badValue, "--bytes \(text): \(error)") }
      case "--domain":
        let text = try reader.value()
        guard text == "caches" || text == "tmp" else {
          throw CLIError(.badValue, "--domain \(text): use caches or tmp")
        }
        domain = text
      case "--all": all = true
      case "--older-than": olderThan = try MountRequest.duration("--older-than", try reader.value())
      case "--help", "-h": throw CLIError(.success, usage)
      default:
        if argument.hasPrefix("-") { throw CLIError(.usage, "unknown option \(argument)") }
        positional.append(argument)
      }
    }
    let mountpoint = try single(positional, usage: usage)
    let request: String
    switch (bytes, olderThan, all, domain) {
    case (let bytes?, nil, false, nil): request = "purge bytes \(bytes)"
    case (nil, let age?, false, _): request = "purge older-than \(age)" + (domain.map { " \($0)" } ?? "")
    case (nil, nil, true, let domain?): request = "purge domain \(domain)"
    default: throw CLIError(.usage, "choose one of --bytes, --domain D --all, --older-than")
    }
    // A large purge takes as long as its unlinks: no timeout; on a terminal, its progress.
    let terminal = TerminalProgress()
    let target = try ControlClient.target(mountpoint)
    let text: String
    do {
      text = try ControlClient.send(
        request + (terminal.isTerminal ? " progress" : ""), to: target, timeoutSeconds: nil
      ) { progress in
        let files = progress["files"] as? Int ?? 0
        let bytes = (progress["bytes"] as? NSNumber)?.int64Value ?? 0
        terminal.update("appbox: purging: \(TerminalProgress.grouped(files)) files, \(ByteCount(bytes).formatted)…")
      }
    } catch {
      terminal.end()
      throw error
    }
    terminal.clear()
    let reply = ControlClient.object(text)
    let files = reply["files"] as? Int ?? 0
    let freed = (reply["bytes"] as? NSNumber)?.int64Value ?? 0
    print("purged \(files) file\(files == 1 ? "" : "s"), \(ByteCount(freed).formatted)")
    return .success
  }

  /// `appbox protect PATH --class NAME`: sets a file's or directory's class on the mount.
  static func protect(_ arguments: [String]) throws(CLIError) -> ExitCode {
    let usage = "usage: appbox protect PATH --class CLASS"
    guard let flag = arguments.firstIndex(of: "--class"), flag + 1 < arguments.count else {
      if arguments.contains("--help") || arguments.contains("-h") { throw CLIError(.success, usage) }
      throw CLIError(.usage, arguments.contains("--class") ? "--class needs a value" : "--class CLASS is missing")
    }
    let name = arguments[flag + 1]
    var rest = arguments
    rest.removeSubrange(flag...(flag + 1))
    let path = try single(rest, usage: usage, what: "PATH")
    guard let protectionClass = ProtectionClass(parsing: name) else {
      throw CLIError(.badValue, "unknown class \(name): \(ProtectionClassNames.help)")
    }
    try requireInsideMount(path)
    do {
      try Xattr.set(path: path, name: AppBoxAttribute.protection.name, value: Array(protectionClass.name.utf8))
    } catch {
      switch error {
      case .notPermitted:
        throw CLIError(
          .failure, "\(path): its current class is not accessible in the device's state (unlock first)")
      case .noEntry: throw CLIError(.noInput, "\(path) does not exist")
      default: throw CLIError(.failure, "\(path): \(error)")
      }
    }
    print("\(path): \(protectionClass.name)")
    return .success
  }

  /// Refuses a path that is not inside an AppBox mount (66): setting the attribute on an
  /// ordinary file would only add a meaningless `user.` attribute to it.
  static func requireInsideMount(_ path: String) throws(CLIError) {
    let st: stat
    do { st = try Sys.statPath(path) } catch {
      throw CLIError(.noInput, error == .noEntry ? "\(path) does not exist" : "\(path): \(error)")
    }
    guard try MountTable.mounts().contains(where: { $0.isAppBox && $0.deviceNumber == st.st_dev }) else {
      throw CLIError(.noInput, "\(path) is not inside an AppBox mount")
    }
  }

  /// The one argument `arguments` must hold, `what` (a MOUNTPOINT); `usage` answers
  /// `--help`.
  static func single(_ arguments: [String], usage: String, what: String = "MOUNTPOINT") throws(CLIError) -> String {
    if let option = arguments.first(where: { $0.hasPrefix("-") }) {
      if option == "--help" || option == "-h" { throw CLIError(.success, usage) }
      throw CLIError(.usage, "unknown option \(option)")
    }
    guard arguments.count == 1 else {
      throw CLIError(
        .usage, arguments.isEmpty ? "missing \(what)" : "too many arguments: \(arguments.joined(separator: " "))")
    }
    return arguments[0]
  }
}

/// `appbox status`'s human-readable form.
enum StatusText {
  static func render(_ status: [String: Any], mountpoint: String) -> String {
    func bytes(_ key: String, in object: [String: Any] = status) -> String {
      ByteCount((object[key] as? NSNumber)?.int64Value ?? 0).formatted
    }
    let usage = status["usage"] as? [String: Any] ?? [:]
    let purgeable = status["purgeable"] as? [String: Any] ?? [:]
    let refusals = status["refusals"] as? [String: Any] ?? [:]
    var lines = [
      "\(mountpoint): \(status["state"] as? String ?? "?")",
      "  backing:     \(status["backing"] as? String ?? "?")",
      "  capacity:    \(bytes("capacity")), used \(bytes("used")), free \(bytes("free"))",
      "  available:   important \(bytes("availableImportant")), opportunistic \(bytes("availableOpportunistic"))",
      "  usage:",
    ]
    for domain in ["documents", "applicationSupport", "preferences", "library", "caches", "tmp", "root"] {
      lines.append("    \(domain.padding(toLength: 20, withPad: " ", startingAt: 0)) \(bytes(domain, in: usage))")
    }
    lines.append(
      "  purgeable:   caches \(bytes("caches", in: purgeable)), tmp \(bytes("tmp", in: purgeable)); policy \(status["purgePolicy"] as? String ?? "lru")"
    )
    lines.append(
      "  counters:    \(status["purges"] ?? 0) purges (\(bytes("bytesPurged"))), \(refusals["total"] ?? 0) refusals, \(status["noSpaceRefusals"] ?? 0) ENOSPC"
    )
    // What the daemon decided on its own, failing closed: said only when there is any.
    let unreadable = (status["unreadableClasses"] as? NSNumber)?.intValue ?? 0
    let internalErrors = ((status["internalErrors"] as? [String: Any])?["total"] as? NSNumber)?.intValue ?? 0
    if unreadable > 0 || internalErrors > 0 {
      lines.append(
        "  attention:   \(unreadable) files whose class cannot be used (they count as complete; see appbox events), \(internalErrors) internal errors (see the daemon's log)"
      )
    }
    let cost = status["purgeCost"] as? [String: Any] ?? [:]
    lines.append(
      "  purge cost:  \(cost["recreated"] ?? 0) purged files created again (\(bytes("recreatedBytes", in: cost)) when purged, \(bytes("bytesWrittenAgain", in: cost)) written again), \(cost["missed"] ?? 0) looked up and missed"
    )
    lines.append(
      "  cache hits:  \(cost["cacheOpens"] ?? 0) opens of Caches files, \(cost["cacheReads"] ?? 0) reads through the daemon (passthrough reads are not seen)"
    )
    lines.append(
      (status["passthrough"] as? Bool ?? false)
        ? "  passthrough: on, \(status["passthroughFiles"] ?? 0) files open that way"
        : "  passthrough: off (needs Linux 6.9 or later and a daemon with CAP_SYS_ADMIN)")
    if let limit = (status["descriptorLimit"] as? NSNumber)?.intValue {
      // Each inode the kernel holds costs the daemon a descriptor, each open file one more.
      lines.append(
        "  descriptors: at most \(limit): one per inode the kernel holds (\(status["nodes"] ?? 0) now), one more per open file (so about \(limit / 2) files open at once)"
      )
    }
    if let gate = status["deviceControl"] as? [String: Any] {
      lines.append(
        "  device control: \(gate["runs"] ?? 0) refusing runs recorded, \(gate["refused"] ?? 0) requests refused to their programs, \(gate["unverifiable"] ?? 0) to processes whose ancestry could not be read, \(gate["turnedAway"] ?? 0) connections turned away"
      )
    }
    if let log = status["eventLog"] as? [String: Any] {
      let size = ByteCount(
        ((log["bytes"] as? NSNumber)?.int64Value ?? 0) + ((log["previousBytes"] as? NSNumber)?.int64Value ?? 0))
      var notes = ["\(size.formatted)", "\(log["coalescedRefusals"] ?? 0) refusals coalesced"]
      if let dropped = (log["droppedEvents"] as? NSNumber)?.intValue, dropped > 0 {
        notes.append("\(dropped) rotated away")
      }
      if let lost = (log["lostEvents"] as? NSNumber)?.intValue, lost > 0 { notes.append("\(lost) not written") }
      if let error = log["error"] as? String { notes.append(error) }
      lines.append("  event log:   mount \(log["id"] as? String ?? "?") (\(notes.joined(separator: ", ")))")
    }
    let busyPoll = status["busyPoll"] as? [String: Any] ?? [:]
    let window = (busyPoll["microseconds"] as? NSNumber)?.intValue ?? 0
    lines.append(
      window == 0
        ? "  busy poll:   off"
        : "  busy poll:   \(window) µs, \(busyPoll["polled"] ?? 0) requests found polling, \(busyPoll["waited"] ?? 0) waited for"
    )
    let transport = status["transport"] as? [String: Any] ?? [:]
    if transport["inUse"] as? String == RequestTransport.ioUring.rawValue {
      lines.append(
        "  transport:   FUSE over io_uring, \(transport["queues"] ?? 0) queues of \(transport["workersPerQueue"] ?? 0) workers"
      )
      if transport["cpuHandoff"] as? Bool == true {
        lines.append(
          "  CPU handoff: \(transport["handoffs"] ?? 0) replies, \(transport["handoffStalls"] ?? 0) paused after a stall")
      } else {
        lines.append("  CPU handoff: off (\(transport["handoffOffReason"] as? String ?? "not available"))")
      }
    } else if let reason = transport["fallbackReason"] as? String {
      lines.append("  transport:   /dev/fuse (FUSE over io_uring is not available: \(reason))")
    } else {
      lines.append("  transport:   /dev/fuse")
    }
    if let cache = status["writeCache"] as? [String: Any] {
      let limit = ((cache["dirtyLimit"] as? NSNumber)?.int64Value ?? 0) >> 20
      lines.append(
        "  write cache: on, \(cache["writers"] ?? 0) writers through it; the kernel holds at most \(limit) MiB unwritten"
      )
    } else {
      lines.append("  write cache: off")
    }
    let requests = status["requests"] as? [String: Any] ?? [:]
    let total = requests.values.reduce(0) { $0 + ((($1 as? NSNumber)?.intValue) ?? 0) }
    lines.append("  requests:    \(total) taken from the kernel (by operation in --json)")
    if status["device"] as? Bool == true {
      lines.append("  containers:  (a device; the device's own directories: \(bytes("deviceUsed")))")
      lines += containers(status["containers"] as? [[String: Any]] ?? []).map { "    " + $0 }
    }
    return lines.joined(separator: "\n")
  }

  /// One line per container of a device: its id, kind, groups or members, and usage.
  static func containers(_ containers: [[String: Any]]) -> [String] {
    guard !containers.isEmpty else { return ["no apps installed"] }
    let width = containers.map { ($0["id"] as? String ?? "").count }.max() ?? 0
    return containers.map { container in
      func bytes(_ key: String, in object: [String: Any]) -> String {
        ByteCount((object[key] as? NSNumber)?.int64Value ?? 0).formatted
      }
      let id = (container["id"] as? String ?? "?").padding(toLength: width, withPad: " ", startingAt: 0)
      let kind = container["kind"] as? String ?? "?"
      let related = (container[kind == "app" ? "groups" : "members"] as? [String] ?? []).joined(separator: ", ")
      let usage = container["usage"] as? [String: Any] ?? [:]
      let purgeable = container["purgeable"] as? [String: Any] ?? [:]
      return "\(id)  \(kind.padding(toLength: 5, withPad: " ", startingAt: 0))  used \(bytes("used", in: container))"
        + " (caches \(bytes("caches", in: usage)), tmp \(bytes("tmp", in: usage)); purgeable \(bytes("caches", in: purgeable)) + \(bytes("tmp", in: purgeable)))"
        + (related.isEmpty ? "" : kind == "app" ? "  groups: \(related)" : "  members: \(related)")
    }
  }
}
