import AppBoxFS
import SandboxPolicy

/// What `appbox mount` was asked to do, parsed and validated (nothing touched yet).
struct MountRequest {
  /// The mountpoint as given.
  var mountpoint: String = ""
  /// The backing directory, or nil for the default under the user's data directory.
  var backing: String?
  /// Stay attached instead of going to the background.
  var foreground = false
  /// Extra FUSE mount options (validated against ``MountRequest/knownOptions``).
  var fuseOptions: [String] = []
  /// Internal: the pipe to report readiness on, inherited from the background parent
  /// (``ReadinessHandshake``); never taken from the command line.
  var readyFD: Int32?
  /// The sandbox's policies.
  var sandbox = SandboxOptions()
  /// Let the kernel serve read-only opens from the backing file (when it can).
  var passthrough = true
  /// Microseconds the daemon polls for a program's next request before it sleeps (nil:
  /// the default for the CPUs the daemon may run on).
  var busyPollMicroseconds: UInt32?
  /// The largest `--busy-poll` accepted.
  static let busyPollLimit: UInt32 = 1000

  /// FUSE options a user may pass with `-o` (libfuse and kernel options that make sense
  /// for AppBox). `default_permissions` is always on.
  static let knownOptions: Set<String> = [
    "allow_other", "allow_root", "auto_unmount", "default_permissions", "ro", "rw", "nosuid", "suid", "nodev", "dev",
    "noexec", "exec", "noatime", "atime", "relatime", "sync", "async", "dirsync", "debug",
  ]
  /// Options with a value (`name=value`).
  static let knownValueOptions: Set<String> = ["max_read"]
  /// Options AppBox sets itself: `fsname=appbox,subtype=appbox` is how `appbox` finds its
  /// mounts (type `fuse.appbox`) to control them.
  static let reservedOptions: Set<String> = ["fsname", "subtype"]
  /// The smallest `--capacity`: room for the layout's directories and some files.
  static let minimumCapacity: Int64 = 1 << 20
  /// The most forgotten nodes `--handles` may retain (slots are 32-bit).
  static let handlesLimit = 1 << 30

  /// The longest duration an option takes (100 years, in seconds).
  static let maximumDuration: Double = 36_500 * 86_400

  static let usage = """
    usage: appbox mount [OPTIONS] MOUNTPOINT

      --backing DIR               where the sandbox's data lives (default:
                                  $XDG_DATA_HOME/appbox/containers/NAME, NAME = the mountpoint's last component)
      --foreground                stay attached (default: return once the mount is ready)
      -o OPTIONS                  FUSE options, e.g. -o allow_other
      --capacity SIZE             the sandbox's capacity, e.g. 500M, 2G (default 4G, at least 1M)
      --bfu                       start before the first unlock (BFU) instead of UNLOCKED
      --grace DURATION            GRACE after a lock, e.g. 10s, 0 (default 10s)
      --cx-timeout DURATION       locked time before completeWhenUserInactive closes (default 60s)
      --default-protection CLASS  class of new items without a parent class (default
                                  completeUntilFirstUserAuthentication)
      --purge-at PERCENT          background purge above this usage, e.g. 90%
      --purge-to PERCENT          ... down to this usage (default: purge-at minus 10 points)
      --tmp-max-age DURATION      purge tmp entries unused for longer, e.g. 3d
      --usage-interval DURATION   log a usage sample at most this often, when it changed
                                  (default 1s; 0 = only at mount, resize and unmount)
      --purge-policy POLICY       purge order within a domain and urgency: lru (default),
                                  fifo (oldest first, uses do not count), largest
      --no-passthrough            serve every read through the daemon (default: the
                                  kernel reads files opened read-only straight from
                                  the backing file, Linux 6.9+ as root)
      --handles COUNT             forgotten files whose file handles (name_to_handle_at,
                                  NFS) stay valid, least recently forgotten dropped
                                  first (default 262144, about 120 bytes each; 0 = none)
      --busy-poll MICROSECONDS    while a program's requests come back to back, poll
                                  this long for the next before sleeping (default 30,
                                  or 0 on a single CPU; 0 = never, at most 1000)

    DURATION is e.g. 10s, 5m, 2h, 3d or 1h30m, at most 36500d.
    """

  /// Parses the arguments after `mount`.
  static func parse(_ arguments: [String]) throws(CLIError) -> MountRequest {
    var request = MountRequest()
    var positional: [String] = []
    var purgeAt: Percentage?
    var purgeTo: Percentage?
    var index = 0
    func value(_ flag: String) throws(CLIError) -> String {
      index += 1
      guard index < arguments.count else { throw CLIError(.usage, "\(flag) needs a value\n\(usage)") }
      return arguments[index]
    }
    while index < arguments.count {
      let argument = arguments[index]
      switch argument {
      case "--backing": request.backing = try value(argument)
      case "--foreground", "-f": request.foreground = true
      case "-o": request.fuseOptions += try parseOptions(try value(argument))
      case "--capacity":
        let text = try value(argument)
        do { request.sandbox.capacity = try ByteCount.parse(text).bytes } catch {
          throw CLIError(.badValue, "--capacity \(text): \(error)")
        }
        guard request.sandbox.capacity >= minimumCapacity else {
          throw CLIError(
            .badValue, "--capacity \(text): too small, the minimum is \(ByteCount(minimumCapacity).formatted) (1M)")
        }
      case "--unlocked": request.sandbox.startUnlocked = true  // the default, kept for old scripts
      case "--bfu": request.sandbox.startUnlocked = false
      case "--no-passthrough": request.passthrough = false
      case "--busy-poll":
        let text = try value(argument)
        guard let microseconds = UInt32(text), microseconds <= busyPollLimit else {
          throw CLIError(.badValue, "--busy-poll \(text): not a number of microseconds from 0 to \(busyPollLimit)")
        }
        request.busyPollMicroseconds = microseconds
      case "--handles":
        let text = try value(argument)
        guard let count = Int(text), count >= 0, count <= handlesLimit else {
          throw CLIError(.badValue, "--handles \(text): not a count from 0 to \(handlesLimit)")
        }
        request.sandbox.retainedHandles = count
      case "--grace": request.sandbox.gracePeriod = try duration(argument, try value(argument))
      case "--cx-timeout": request.sandbox.inactivityTimeout = try duration(argument, try value(argument))
      case "--tmp-max-age": request.sandbox.tmpMaxAge = try duration(argument, try value(argument))
      case "--usage-interval": request.sandbox.usageInterval = try duration(argument, try value(argument))
      case "--purge-policy":
        let text = try value(argument)
        guard let policy = PurgePolicy(parsing: text) else {
          throw CLIError(.badValue, "--purge-policy \(text): use one of \(PurgePolicy.names)")
        }
        request.sandbox.purgePolicy = policy
      case "--default-protection":
        let text = try value(argument)
        guard let parsed = ProtectionClass(parsing: text) else {
          throw CLIError(.badValue, "--default-protection \(text): unknown class (\(ProtectionClassNames.help))")
        }
        request.sandbox.defaultProtection = parsed
      case "--purge-at": purgeAt = try percentage(argument, try value(argument))
      case "--purge-to": purgeTo = try percentage(argument, try value(argument))
      case "--help", "-h": throw CLIError(.success, usage)
      default:
        if argument.hasPrefix("-o"), argument.count > 2 {
          request.fuseOptions += try parseOptions(String(argument.dropFirst(2)))
        } else if argument.hasPrefix("--backing=") {
          request.backing = String(argument.dropFirst("--backing=".count))
        } else if argument.hasPrefix("-") && argument != "-" {
          throw CLIError(.usage, "unknown option \(argument)\n\(usage)")
        } else {
          positional.append(argument)
        }
      }
      index += 1
    }
    guard positional.count == 1 else {
      throw CLIError(
        .usage,
        (positional.isEmpty ? "missing MOUNTPOINT" : "too many arguments: \(positional.joined(separator: " "))")
          + "\n\(usage)")
    }
    request.mountpoint = positional[0]
    // Access times: the last of noatime, atime and relatime counts. relatime is what the
    // kernel does without noatime, and libfuse knows neither it nor atime, so only an
    // effective noatime goes to the kernel.
    let atimeOptions: Set = ["noatime", "atime", "relatime"]
    request.sandbox.noAccessTime = request.fuseOptions.last(where: atimeOptions.contains) == "noatime"
    request.fuseOptions.removeAll { atimeOptions.contains($0) && !($0 == "noatime" && request.sandbox.noAccessTime) }
    // The kernel's passthrough reads update the backing file's access time.
    if request.sandbox.noAccessTime { request.passthrough = false }
    if request.backing == "" { throw CLIError(.usage, "--backing needs a directory") }
    if let purgeAt {
      let low = purgeTo ?? Percentage(max(0, purgeAt.value - 10))
      do { request.sandbox.waterMarks = try WaterMarks(high: purgeAt, low: low) } catch {
        throw CLIError(.badValue, "--purge-at/--purge-to: \(error)")
      }
    } else if purgeTo != nil {
      throw CLIError(.usage, "--purge-to needs --purge-at")
    }
    return request
  }

  /// A duration option's value in seconds, at most ``maximumDuration``.
  static func duration(_ flag: String, _ text: String) throws(CLIError) -> Double {
    let seconds: Double
    do { seconds = try DurationText.parse(text) } catch {
      throw CLIError(.badValue, "\(flag) \(text): \(error)")
    }
    guard seconds.isFinite, seconds >= 0, seconds <= maximumDuration else {
      throw CLIError(.badValue, "\(flag) \(text): too long, the longest is 36500d (100 years)")
    }
    return seconds
  }

  static func percentage(_ flag: String, _ text: String) throws(CLIError) -> Percentage {
    do { return try Percentage.parse(text) } catch {
      throw CLIError(.badValue, "\(flag) \(text): \(error)")
    }
  }

  /// Splits and checks a comma-separated `-o` list.
  static func parseOptions(_ list: String) throws(CLIError) -> [String] {
    var options: [String] = []
    for option in list.split(separator: ",", omittingEmptySubsequences: true).map(String.init) {
      if let equals = option.firstIndex(of: "=") {
        let name = String(option[..<equals])
        let value = option[option.index(after: equals)...]
        if reservedOptions.contains(name) {
          throw CLIError(
            .usage,
            "-o \(option): AppBox sets fsname and subtype itself (appbox finds its mounts by them); leave it out")
        }
        guard knownValueOptions.contains(name), !value.isEmpty else {
          throw CLIError(
            .usage,
            "unknown or empty mount option -o \(option) (known with a value: \(knownValueOptions.sorted().joined(separator: ", ")))"
          )
        }
        guard (UInt32(value) ?? 0) > 0 else {
          throw CLIError(.badValue, "-o \(option): not a number of bytes from 1 to \(UInt32.max)")
        }
      } else if !knownOptions.contains(option) {
        throw CLIError(
          .usage, "unknown mount option -o \(option) (known: \(knownOptions.sorted().joined(separator: ", ")))")
      }
      options.append(option)
    }
    return options
  }
}
