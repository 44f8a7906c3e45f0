import Foundation
import SandboxPolicy

/// `appbox app install|remove|list`: the apps of a device mount (docs/reference.md#a-device),
/// through its daemon.
enum AppCommand {
  static let usage = """
    usage: appbox app install MOUNTPOINT BUNDLE-ID [--group GROUP-ID]...
           appbox app remove MOUNTPOINT BUNDLE-ID
           appbox app list MOUNTPOINT [--json]

      The apps of a device mount (appbox mount --device). install makes the app's container
      in Containers/Data/Application/BUNDLE-ID, and Containers/Shared/AppGroup/GROUP-ID for
      each group that does not exist yet. remove deletes its container, and the containers
      of the groups it was the last member of (refused while appbox run --app runs it).
      list shows the apps, the groups, their members and each container's usage.
      Ids are reverse-DNS names: letters, digits and '-' between dots, at most 217 bytes.
    """

  /// Runs `appbox app …`.
  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    guard let verb = arguments.first else { throw CLIError(.usage, "missing install, remove or list") }
    if verb == "--help" || verb == "-h" { throw CLIError(.success, usage) }
    let rest = Array(arguments.dropFirst())
    if rest.contains("--help") || rest.contains("-h") { throw CLIError(.success, usage) }
    switch verb {
    case "install": return try install(rest)
    case "remove": return try remove(rest)
    case "list": return try list(rest)
    default: throw CLIError(.usage, "unknown app command \(verb): use install, remove or list")
    }
  }

  /// `appbox app install MOUNTPOINT BUNDLE-ID [--group GROUP-ID]…`.
  static func install(_ arguments: [String]) throws(CLIError) -> ExitCode {
    var positional: [String] = []
    var groups: [ContainerIdentifier] = []
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
      switch argument {
      case "--group": groups.append(try identifier(try reader.value(), what: "--group"))
      default:
        if argument.hasPrefix("-") { throw CLIError(.usage, "unknown option \(argument)") }
        positional.append(argument)
      }
    }
    guard positional.count == 2 else {
      throw CLIError(.usage, positional.count < 2 ? "missing MOUNTPOINT or BUNDLE-ID" : "too many arguments")
    }
    let app = try identifier(positional[1], what: "bundle id")
    let reply = ControlClient.object(
      try send(([app] + groups).map(\.name).joined(separator: " "), verb: "app-install", to: positional[0]))
    let created = reply["created"] as? [String] ?? []
    print("installed \(app)" + (created.isEmpty ? "" : "; new groups: \(created.joined(separator: ", "))"))
    return .success
  }

  /// `appbox app remove MOUNTPOINT BUNDLE-ID`.
  static func remove(_ arguments: [String]) throws(CLIError) -> ExitCode {
    if let option = arguments.first(where: { $0.hasPrefix("-") }) { throw CLIError(.usage, "unknown option \(option)") }
    guard arguments.count == 2 else {
      throw CLIError(.usage, arguments.count < 2 ? "missing MOUNTPOINT or BUNDLE-ID" : "too many arguments")
    }
    let app = try identifier(arguments[1], what: "bundle id")
    let reply = ControlClient.object(try send(app.name, verb: "app-remove", to: arguments[0]))
    let groups = reply["groups"] as? [String] ?? []
    let files = reply["files"] as? Int ?? 0
    let bytes = (reply["bytes"] as? NSNumber)?.int64Value ?? 0
    print(
      "removed \(app) (\(files) file\(files == 1 ? "" : "s"), \(ByteCount(bytes).formatted))"
        + (groups.isEmpty ? "" : "; groups removed with it: \(groups.joined(separator: ", "))"))
    return .success
  }

  /// `appbox app list MOUNTPOINT [--json]`.
  static func list(_ arguments: [String]) throws(CLIError) -> ExitCode {
    let json = arguments.contains("--json")
    let mountpoint = try ControlCommands.single(
      arguments.filter { $0 != "--json" }, usage: "usage: appbox app list MOUNTPOINT [--json]")
    let reply = ControlClient.object(try send("", verb: "app-list", to: mountpoint))
    let status = reply["status"] as? [String: Any] ?? [:]
    let containers = status["containers"] as? [[String: Any]] ?? []
    if json {
      let object: [String: Any] = [
        "apps": containers.filter { $0["kind"] as? String == "app" },
        "groups": containers.filter { $0["kind"] as? String == "group" },
        "capacity": status["capacity"] ?? 0, "used": status["used"] ?? 0, "free": status["free"] ?? 0,
      ]
      let data: Data
      do { data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) } catch {
        throw CLIError(.failure, "cannot write the list as JSON: \(error.localizedDescription)")
      }
      print(String(decoding: data, as: UTF8.self))
      return .success
    }
    print(StatusText.containers(containers).joined(separator: "\n"))
    return .success
  }

  /// `text` checked as an id (65 with the reason when it is not one).
  static func identifier(_ text: String, what: String) throws(CLIError) -> ContainerIdentifier {
    do throws(ContainerIdentifier.Problem) { return try ContainerIdentifier(validating: text) } catch {
      throw CLIError(.badValue, "\(what) \(text.prefix(300)): \(error)")
    }
  }

  /// Sends `verb WORDS` to the daemon of `mountpoint`; a request that takes a while (a
  /// removal unlinks every file of the container) has no timeout.
  private static func send(_ words: String, verb: String, to mountpoint: String) throws(CLIError) -> String {
    let target = try ControlClient.target(mountpoint)
    return try ControlClient.send(words.isEmpty ? verb : "\(verb) \(words)", to: target, timeoutSeconds: nil)
  }
}
