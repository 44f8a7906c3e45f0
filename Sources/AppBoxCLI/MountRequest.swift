import AppBoxFS
import FilesystemInterface
import Foundation
import Posix
import SandboxPolicy

/// What `appbox mount` was asked to do, parsed and validated (nothing touched yet). The
/// options come from ``MountOptions/all``.
struct MountRequest {
  /// The mountpoint as given.
  var mountpoint: String = ""
  /// The backing directory, or nil for the default under the user's data directory.
  var backing: String?
  /// Stay attached instead of going to the background.
  var foreground = false
  /// Mount over a directory that has entries (`--nonempty`, `-o nonempty`): AppBox's
  /// own check, as libfuse 3 has none.
  var nonempty = false
  /// FUSE options for libfuse, as the table spells them (`allow_other`, `max_read=N`).
  var fuseOptions: [String] = []
  /// The mount's source (`-o fsname=`), nil for `appbox`.
  var fsname: String?
  /// The largest read request (`-o max_read=`), which libfuse needs both as a mount
  /// option and in the INIT reply; nil for the kernel's.
  var maxRead: UInt32?
  /// Internal: the pipe to report readiness on, inherited from the background parent
  /// (``ReadinessHandshake``); never taken from the command line.
  var readyFD: Int32?
  /// The sandbox's policies.
  var sandbox = SandboxOptions()
  /// Let the kernel serve read-only opens from the backing file (when it can).
  var passthrough = true
  /// Let the kernel cache writes (its writeback cache; passthrough is then off).
  var writeCache = false
  /// io_uring: a ring worker hands its CPU to the program its reply wakes.
  var cpuHandoff = true
  /// Microseconds the daemon polls for a program's next request before it sleeps (nil:
  /// the default for the CPUs the daemon may run on).
  var busyPollMicroseconds: UInt32?
  /// Each option given, in its `-o` form and in order (the fstab form); `--backing` and
  /// `--foreground` have none.
  var oItems: [String] = []

  /// How requests should reach the daemon (nil: `APPBOX_TRANSPORT`, else the session's
  /// default, io_uring where available).
  var transport: RequestTransport?
  /// The environment variable that chooses the transport when `--transport` is not given
  /// (a whole test run on one transport).
  static let transportVariable = "APPBOX_TRANSPORT"
  /// The transport `APPBOX_TRANSPORT` names (nil when unset or empty).
  /// - Throws: 65 for a value that names no transport.
  static func environmentTransport() throws(CLIError) -> RequestTransport? {
    guard let text = ProcessInfo.processInfo.environment[transportVariable], !text.isEmpty else { return nil }
    guard let transport = RequestTransport(rawValue: text) else {
      throw CLIError(.badValue, "\(transportVariable)=\(text): use io-uring or dev-fuse")
    }
    return transport
  }
  /// Turn the fuse module's `enable_uring` on before mounting (host-wide; root only).
  var enableURing = false
  /// The largest `--busy-poll` accepted.
  static let busyPollLimit: UInt32 = 1000
  /// The smallest `--capacity`: room for the layout's directories and some files.
  static let minimumCapacity: Int64 = 1 << 20
  /// The most forgotten nodes `--handles` may retain (slots are 32-bit).
  static let handlesLimit = 1 << 30
  /// The longest duration an option takes (100 years, in seconds).
  static let maximumDuration: Double = 36_500 * 86_400

  /// `appbox mount --help`.
  static var usage: String { MountOptions.usage }

  /// A request while its options are applied, with what only the whole command line
  /// decides.
  struct Draft {
    /// The request so far.
    var request = MountRequest()
    /// `--purge-at`, checked against `--purge-to` at the end.
    var purgeAt: Percentage?
    /// `--purge-to`.
    var purgeTo: Percentage?
  }

  /// Parses the arguments after `mount`.
  /// - Parameter isRoot: whether the caller may set root's options (`suid`, `dev`).
  /// - Throws: 64 for an unknown option, a missing value or a wrong number of
  ///   arguments, 65 for a bad value, 77 for root's option set by another user.
  static func parse(_ arguments: [String], isRoot: Bool = Sys.effectiveUID == 0) throws(CLIError) -> MountRequest {
    var draft = Draft()
    var positional: [String] = []
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
      if argument == "--help" || argument == "-h" { throw CLIError(.success, usage) }
      if argument == "-o" {
        try draft.applyList(try reader.value(), isRoot: isRoot)
      } else if argument.hasPrefix("-o"), argument.count > 2 {
        try draft.applyList(String(argument.dropFirst(2)), isRoot: isRoot)
      } else if argument.hasPrefix("-"), argument != "-" {
        let (flag, inline) = splitFlag(argument)
        guard let option = MountOptions.option(flag: flag) else { throw CLIError(.usage, "unknown option \(argument)") }
        switch option.value {
        case .none:
          guard inline == nil else { throw CLIError(.usage, "\(flag) takes no value") }
          try draft.apply(option, nil, given: flag, isRoot: isRoot)
        case .required:
          var value = inline ?? ""
          if inline == nil { value = try reader.value() }
          try draft.apply(option, value, given: inline == nil ? "\(flag) \(value)" : argument, isRoot: isRoot)
        }
      } else {
        positional.append(argument)
      }
    }
    guard positional.count == 1 else {
      throw CLIError(
        .usage, positional.isEmpty ? "missing MOUNTPOINT" : "too many arguments: \(positional.joined(separator: " "))")
    }
    var request = draft.request
    request.mountpoint = positional[0]
    // Access times: the last of noatime, atime and relatime counts. relatime is what the
    // kernel does without noatime, and libfuse knows neither it nor atime, so only an
    // effective noatime goes to the kernel.
    let atimeOptions: Set = ["noatime", "atime", "relatime"]
    request.sandbox.noAccessTime = request.fuseOptions.last(where: atimeOptions.contains) == "noatime"
    request.fuseOptions.removeAll { atimeOptions.contains($0) && !($0 == "noatime" && request.sandbox.noAccessTime) }
    // The kernel's passthrough reads update the backing file's access time.
    if request.sandbox.noAccessTime { request.passthrough = false }

    if let purgeAt = draft.purgeAt {
      let low = draft.purgeTo ?? Percentage(max(0, purgeAt.value - 10))
      do { request.sandbox.waterMarks = try WaterMarks(high: purgeAt, low: low) } catch {
        throw CLIError(.badValue, "--purge-at/--purge-to: \(error)")
      }
    } else if draft.purgeTo != nil {
      throw CLIError(.usage, "--purge-to needs --purge-at")
    }
    return request
  }

  /// `--name=value` as the flag and its value; any other argument as itself and nil.
  static func splitFlag(_ argument: String) -> (flag: String, value: String?) {
    guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
    return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
  }

  /// A capacity option's value in bytes, at least ``minimumCapacity``.
  static func capacity(_ given: String, _ text: String) throws(CLIError) -> Int64 {
    let bytes: Int64
    do { bytes = try ByteCount.parse(text).bytes } catch {
      throw CLIError(.badValue, "\(given): \(error)")
    }
    guard bytes >= minimumCapacity else {
      throw CLIError(.badValue, "\(given): too small, the minimum is \(ByteCount(minimumCapacity).formatted) (1M)")
    }
    return bytes
  }

  /// A duration option's value in seconds, at most ``maximumDuration``.
  static func duration(_ flag: String, _ text: String) throws(CLIError) -> Double {
    try seconds(text, given: "\(flag) \(text)")
  }

  /// A duration's seconds, at most ``maximumDuration``; `given` is the option as written,
  /// for the message.
  static func seconds(_ text: String, given: String) throws(CLIError) -> Double {
    let seconds: Double
    do { seconds = try DurationText.parse(text) } catch {
      throw CLIError(.badValue, "\(given): \(error)")
    }
    guard seconds.isFinite, seconds >= 0, seconds <= maximumDuration else {
      throw CLIError(.badValue, "\(given): too long, the longest is 36500d (100 years)")
    }
    return seconds
  }

  /// A percentage option's value; `given` is the option as written, for the message.
  static func percentage(_ given: String, _ text: String) throws(CLIError) -> Percentage {
    do { return try Percentage.parse(text) } catch {
      throw CLIError(.badValue, "\(given): \(error)")
    }
  }
}

extension MountRequest.Draft {
  /// Applies one option after checking who may set it; records its `-o` form.
  mutating func apply(_ option: MountOption, _ value: String?, given: String, isRoot: Bool) throws(CLIError) {
    switch option.access {
    case .anyone: break
    case .root:
      guard isRoot else {
        throw CLIError(
          .noPermission,
          "\(given): only root may set it (a FUSE mount by another user is always nosuid,nodev); leave it out"
            + " (mount -t and fstab: mount.fuse3 asks for suid,dev unless the line says nosuid,nodev)")
      }
    case .nobody(let reason):
      throw CLIError(.usage, "\(given): \(reason); leave it out")
    }
    try option.apply(&self, value, given)
    if option.hasOForm { request.oItems.append(value.map { "\(option.name)=\($0)" } ?? option.name) }
  }

  /// Applies a comma-separated `-o` list: AppBox's options and FUSE's.
  mutating func applyList(_ list: String, isRoot: Bool) throws(CLIError) {
    for item in list.split(separator: ",", omittingEmptySubsequences: true) {
      let equals = item.firstIndex(of: "=")
      let name = equals.map { item[..<$0] } ?? item
      let value = equals.map { String(item[item.index(after: $0)...]) }
      guard let option = MountOptions.option(oName: name) else {
        throw CLIError(.usage, "unknown mount option -o \(item)")
      }
      switch (option.value, value) {
      case (.none, nil): break
      case (.none, .some): throw CLIError(.usage, "-o \(name) takes no value")
      case (.required(let placeholder), let value):
        guard let value, !value.isEmpty else {
          throw CLIError(.usage, "-o \(name) needs a value (\(option.name)=\(placeholder))")
        }
      }
      try apply(option, value, given: "-o \(item)", isRoot: isRoot)
    }
  }
}
