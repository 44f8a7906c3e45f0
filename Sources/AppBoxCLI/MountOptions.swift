import AppBoxFS
import FilesystemInterface
import Foundation
import SandboxPolicy

/// Every `appbox mount` option, each declared once (docs/reference.md#mounting shows the
/// same table; a test checks that it does, and the README's and the manual page's).
enum MountOptions {
  /// The options, in the order the help lists them.
  static let all: [MountOption] = appboxOptions + fuseOptions

  /// AppBox's own options: `--NAME`, and `-o NAME` / `-o NAME=VALUE` in `mount -t
  /// fuse.appbox` and `/etc/fstab` (and after `appbox mount -o`).
  static let appboxOptions: [MountOption] = [
    .appbox(
      "backing", .required("DIR"), default: .described("$XDG_DATA_HOME/appbox/containers/NAME"), oForm: false,
      help: "where the sandbox's data lives (one mount per directory); NAME is the mountpoint's last component"
    ) { draft, value, given throws(CLIError) in
      guard let value, !value.isEmpty else { throw CLIError(.usage, "--backing needs a directory") }
      draft.request.backing = value
    },
    .appbox(
      "foreground", .none, default: .described("off"), short: "-f", oForm: false,
      help: "stay attached instead of returning once the mount is ready"
    ) { draft, _, _ throws(CLIError) in draft.request.foreground = true },
    .appbox(
      "nonempty", .none, default: .described("off"),
      help: "mount over a directory that has entries (they are hidden until the unmount)"
    ) { draft, _, _ throws(CLIError) in draft.request.nonempty = true },
    .appbox(
      "device", .none, default: .described("off"),
      help:
        "mount a device: app and App Group containers on one capacity, lock state and purge order (appbox app install adds apps)"
    ) { draft, _, _ throws(CLIError) in draft.request.sandbox.device = true },
    .appbox(
      "capacity", .required("SIZE"), default: .value("4G"),
      help: "the sandbox's capacity, e.g. 500M, 2G (binary units, at least 1M)"
    ) { draft, value, given throws(CLIError) in
      draft.request.sandbox.capacity = try MountRequest.capacity(given, value ?? "")
    },
    .appbox(
      "bfu", .none, default: .described("off"), help: "start before the first unlock (BFU) instead of UNLOCKED"
    ) { draft, _, _ throws(CLIError) in draft.request.sandbox.startUnlocked = false },
    .appbox(
      "unlocked", .none, default: .described("on"), help: "start UNLOCKED (the default; kept for old scripts)"
    ) { draft, _, _ throws(CLIError) in draft.request.sandbox.startUnlocked = true },
    .appbox(
      "grace", .required("DURATION"), default: .value("10s"),
      help: "GRACE after a lock, e.g. 10s (0: straight to LOCKED)"
    ) { draft, value, given throws(CLIError) in
      draft.request.sandbox.gracePeriod = try MountRequest.seconds(value ?? "", given: given)
    },
    .appbox(
      "cx-timeout", .required("DURATION"), default: .value("60s"),
      help: "locked time after which completeWhenUserInactive closes"
    ) { draft, value, given throws(CLIError) in
      draft.request.sandbox.inactivityTimeout = try MountRequest.seconds(value ?? "", given: given)
    },
    .appbox(
      "default-protection", .required("CLASS"), default: .value("completeUntilFirstUserAuthentication"),
      help: "class of new items whose directory has none"
    ) { draft, value, given throws(CLIError) in
      guard let parsed = ProtectionClass(parsing: value ?? "") else {
        throw CLIError(.badValue, "\(given): unknown class (\(ProtectionClassNames.help))")
      }
      draft.request.sandbox.defaultProtection = parsed
    },
    .appbox(
      "purge-at", .required("PERCENT"), default: .described("off"),
      help: "purge in the background above this usage, e.g. 90%"
    ) { draft, value, given throws(CLIError) in draft.purgeAt = try MountRequest.percentage(given, value ?? "") },
    .appbox(
      "purge-to", .required("PERCENT"), default: .described("purge-at minus 10 points"),
      help: "... down to this usage"
    ) { draft, value, given throws(CLIError) in draft.purgeTo = try MountRequest.percentage(given, value ?? "") },
    .appbox(
      "tmp-max-age", .required("DURATION"), default: .described("off"),
      help: "purge tmp entries unused for longer, e.g. 3d"
    ) { draft, value, given throws(CLIError) in
      draft.request.sandbox.tmpMaxAge = try MountRequest.seconds(value ?? "", given: given)
    },
    .appbox(
      "usage-interval", .required("DURATION"), default: .value("1s"),
      help: "log a usage sample at most this often, when it changed (0: at mount, resize and unmount only)"
    ) { draft, value, given throws(CLIError) in
      draft.request.sandbox.usageInterval = try MountRequest.seconds(value ?? "", given: given)
    },
    .appbox(
      "purge-policy", .required("POLICY"), default: .value("lru"),
      help: "purge order within a domain and urgency: lru, fifo (oldest first, uses do not count), largest"
    ) { draft, value, given throws(CLIError) in
      guard let policy = PurgePolicy(parsing: value ?? "") else {
        throw CLIError(.badValue, "\(given): use one of \(PurgePolicy.names)")
      }
      draft.request.sandbox.purgePolicy = policy
    },
    .appbox(
      "no-passthrough", .none, default: .described("off"),
      help: "serve every read through the daemon, none by the kernel from the backing file"
    ) { draft, _, _ throws(CLIError) in draft.request.passthrough = false },
    .appbox(
      "write-cache", .none, default: .described("off"),
      help:
        "let the kernel cache writes and write them back later: small writes stay in the kernel; no passthrough; ENOSPC may come at fsync or close"
    ) { draft, _, _ throws(CLIError) in draft.request.writeCache = true },
    .appbox(
      "handles", .required("COUNT"), default: .value("262144"),
      help: "forgotten files whose file handles (NFS, name_to_handle_at) stay valid, about 120 bytes each (0: none)"
    ) { draft, value, given throws(CLIError) in
      guard let count = Int(value ?? ""), count >= 0, count <= MountRequest.handlesLimit else {
        throw CLIError(.badValue, "\(given): not a count from 0 to \(MountRequest.handlesLimit)")
      }
      draft.request.sandbox.retainedHandles = count
    },
    .appbox(
      "busy-poll", .required("MICROSECONDS"), default: .described("30 (0 on one CPU)"),
      help: "poll this long for a program's next request before sleeping (0: never, at most 1000)"
    ) { draft, value, given throws(CLIError) in
      guard let microseconds = UInt32(value ?? ""), microseconds <= MountRequest.busyPollLimit else {
        throw CLIError(.badValue, "\(given): not a number of microseconds from 0 to \(MountRequest.busyPollLimit)")
      }
      draft.request.busyPollMicroseconds = microseconds
    },
    .appbox(
      "transport", .required("TRANSPORT"), default: .described("$APPBOX_TRANSPORT, else io-uring"),
      help:
        "how requests reach the daemon: io-uring (FUSE over io_uring; /dev/fuse where the kernel or host refuses it) or dev-fuse"
    ) { draft, value, given throws(CLIError) in
      guard let transport = RequestTransport(rawValue: value ?? "") else {
        throw CLIError(.badValue, "\(given): use io-uring or dev-fuse")
      }
      draft.request.transport = transport
    },
    .appbox(
      "no-cpu-handoff", .none, default: .described("hand off where allowed"),
      help:
        "io-uring: reply as normal threads, not as SCHED_IDLE ones that keep the woken program on its CPU"
    ) { draft, _, _ throws(CLIError) in draft.request.cpuHandoff = false },
    .appbox(
      "enable-uring", .none, default: .described("off"),
      help: "turn FUSE over io_uring on for the whole host first (writes 1 to /sys/module/fuse/parameters/enable_uring)"
    ) { draft, _, _ throws(CLIError) in draft.request.enableURing = true },
  ]

  /// FUSE and kernel options, `-o` only. Each either works as documented or is refused
  /// before anything is mounted; anything else is refused as unknown.
  static let fuseOptions: [MountOption] = [
    .fuse(
      "allow_other", default: .described("on for root"),
      help: "other users may use the mount (a user other than root needs user_allow_other in /etc/fuse.conf)"),
    .fuse("allow_root", help: "root may use the mount too (needs user_allow_other as allow_other does)"),
    .fuse("auto_unmount", help: "unmount when the daemon ends, even when it is killed"),
    .fuse("default_permissions", default: .described("on"), help: "the kernel checks modes (always on)"),
    .fuse("ro", help: "read-only mount"),
    .fuse("rw", default: .described("on"), help: "read-write mount"),
    .fuse("nosuid", default: .described("on"), help: "set-user-ID and set-group-ID bits are not honoured"),
    .fuse("suid", access: .root, help: "set-user-ID and set-group-ID bits are honoured"),
    .fuse("nodev", default: .described("on"), help: "device files cannot be opened"),
    .fuse("dev", access: .root, help: "device files can be opened"),
    .fuse("noexec", help: "programs on the mount cannot be run"),
    .fuse("exec", default: .described("on"), help: "programs on the mount can be run"),
    .fuse("noatime", help: "reads leave access times alone (and passthrough is off)"),
    .fuse("atime", help: "reads update access times"),
    .fuse(
      "relatime", default: .described("on"),
      help: "reads update access times older than the last change (the last of noatime, atime, relatime counts)"),
    .fuse("sync", help: "writes are synchronous (O_SYNC)"),
    .fuse("async", default: .described("on"), help: "writes are asynchronous"),
    .fuse("dirsync", help: "directory changes are synchronous"),
    .fuse("debug", help: "libfuse logs every request to the daemon's log"),
    MountOption(
      name: "max_read", kind: .fuse, flag: nil, shortFlag: nil, hasOForm: true, value: .required("BYTES"),
      defaultValue: .described("the kernel's"), access: .anyone,
      help: "the largest read request the kernel sends (at least 4096 is used)"
    ) { draft, value, given throws(CLIError) in
      guard let bytes = UInt32(value ?? ""), bytes > 0 else {
        throw CLIError(.badValue, "\(given): not a number of bytes from 1 to \(UInt32.max)")
      }
      draft.request.maxRead = bytes
      draft.request.fuseOptions.removeAll { $0.hasPrefix("max_read=") }
      draft.request.fuseOptions.append("max_read=\(bytes)")
    },
    MountOption(
      name: "fsname", kind: .fuse, flag: nil, shortFlag: nil, hasOForm: true, value: .required("NAME"),
      defaultValue: .value("appbox"), access: .anyone,
      help: "the mount's source as df, findmnt and /proc/mounts show it"
    ) { draft, value, given throws(CLIError) in
      let name = value ?? ""
      guard !name.unicodeScalars.contains(where: { $0 == "\\" || $0.value < 0x20 || $0.value == 0x7f }) else {
        throw CLIError(.badValue, "\(given): a backslash or a control character cannot be in a mount's source")
      }
      draft.request.fsname = name
    },
    .fuse(
      "subtype", .required("TYPE"),
      access: .nobody("AppBox sets it: the type fuse.appbox is how appbox tells its mounts apart"),
      help: "the mount's type is always fuse.appbox"),
  ]

  /// The option with the flag `flag` (`--capacity`, `-f`).
  static func option(flag: String) -> MountOption? {
    all.first { $0.flag == flag || ($0.shortFlag != nil && $0.shortFlag == flag) }
  }

  /// The option with the `-o` name `name` (`-` or `_` between words).
  static func option(oName name: some StringProtocol) -> MountOption? {
    let wanted = MountOption.normalized(name)
    return all.first { $0.hasOForm && $0.normalizedName == wanted }
  }

  /// The flags that take a value (their value is never the MOUNTPOINT).
  static var flagsWithValue: Set<String> {
    Set(all.compactMap { option in option.value == .none ? nil : option.flag } + ["-o"])
  }
}

// MARK: - Help and the fstab form

extension MountOptions {
  /// `appbox mount --help`.
  static var usage: String {
    var lines = [
      "usage: appbox mount [OPTIONS] MOUNTPOINT",
      "       appbox mount --fstab [OPTIONS] MOUNTPOINT   (print the /etc/fstab line instead)",
      "       mount -t fuse.appbox BACKING MOUNTPOINT -o OPTIONS (and /etc/fstab)",
      "",
    ]
    lines += wrapped(
      "Each option but --backing and --foreground is also an -o option, -o NAME or -o NAME=VALUE"
        + " (- or _ between words), as mount -t and /etc/fstab give them. The mountpoint must be"
        + " empty (or --nonempty). Without --backing, appbox mount says where the data goes.",
      indent: "")
    lines.append("")
    for option in appboxOptions {
      let spellings = [option.flagForm, option.shortFlag, option.oForm.map { "-o " + $0 }].compactMap { $0 }
      lines.append("  " + spellings.joined(separator: ", "))
      lines += wrapped(option.help + (option.defaultValue.text.map { " (default: \($0))" } ?? ""), indent: "      ")
    }
    lines += ["", "FUSE options (-o only):", ""]
    for option in fuseOptions {
      var help = option.help
      switch option.access {
      case .anyone: break
      case .root: help += "; root only"
      case .nobody: help += "; refused"
      }
      if let text = option.defaultValue.text { help += " (default: \(text))" }
      let form = "  -o " + (option.oForm ?? option.name)
      let column = 24
      var text = wrapped(help, indent: String(repeating: " ", count: column))
      if form.count < column {
        text[0] = form.padding(toLength: column, withPad: " ", startingAt: 0) + text[0].dropFirst(column)
      } else {
        text.insert(form, at: 0)
      }
      lines += text
    }
    lines += [""]
    lines += wrapped(
      "SIZE: 500M, 2G (binary units). DURATION: 10s, 5m, 2h, 3d or 1h30m, at most 36500d."
        + " PERCENT: 90%. CLASS: complete, completeUnlessOpen, completeUntilFirstUserAuthentication,"
        + " completeWhenUserInactive, none (or A, B, C, CX, D). More: docs/reference.md#mounting, man appbox.",
      indent: "")
    return lines.joined(separator: "\n")
  }

  /// The help's width.
  static let helpWidth = 88

  /// `text` in lines of at most ``helpWidth`` columns (but for a longer word), each
  /// starting with `indent`.
  static func wrapped(_ text: String, indent: String) -> [String] {
    var lines: [String] = []
    var line = indent
    for word in text.split(separator: " ") {
      if line.count > indent.count && line.count + 1 + word.count > helpWidth {
        lines.append(line)
        line = indent
      }
      line += (line.count > indent.count ? " " : "") + word
    }
    lines.append(line)
    return lines
  }

  /// The `/etc/fstab` line that mounts what `request` asks for: the backing directory as
  /// the source, each option given in its `-o` form, in order.
  static func fstabLine(_ request: MountRequest, backing: String, mountpoint: String) -> String {
    // fstab separates fields by blanks and reads octal escapes in the paths.
    func escaped(_ path: String) -> String {
      path.replacingOccurrences(of: "\\", with: "\\134").replacingOccurrences(of: " ", with: "\\040")
        .replacingOccurrences(of: "\t", with: "\\011").replacingOccurrences(of: "\n", with: "\\012")
    }
    let options = request.oItems.isEmpty ? "defaults" : request.oItems.joined(separator: ",")
    return "\(escaped(backing)) \(escaped(mountpoint)) fuse.appbox \(escaped(options)) 0 0"
  }
}
