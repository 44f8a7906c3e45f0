/// The form `mount -t fuse.appbox` and `/etc/fstab` call AppBox in: mount.fuse3 runs
/// `appbox SOURCE MOUNTPOINT -o OPTIONS`, SOURCE being the backing directory. Every mount
/// option is then an `-o` option: AppBox's own as `name=value` (or a bare flag), the
/// rest FUSE options as with `appbox mount -o`.
enum FstabArguments {
  /// AppBox's options as `-o` names (`-` or `_` between words), and the `appbox mount`
  /// flag each stands for.
  static let valueOptions: [String: String] = [
    "capacity": "--capacity", "grace": "--grace", "cx-timeout": "--cx-timeout",
    "default-protection": "--default-protection", "purge-at": "--purge-at", "purge-to": "--purge-to",
    "tmp-max-age": "--tmp-max-age", "busy-poll": "--busy-poll", "handles": "--handles",
    "usage-interval": "--usage-interval", "purge-policy": "--purge-policy",
  ]
  /// AppBox's flags as `-o` names.
  static let flagOptions: [String: String] = [
    "bfu": "--bfu", "unlocked": "--unlocked", "no-passthrough": "--no-passthrough",
  ]

  /// Whether `arguments` are in this form: a source and an existing mountpoint first,
  /// neither of them a command.
  static func matches(_ arguments: [String], isDirectory: (String) -> Bool) -> Bool {
    arguments.count >= 2 && !arguments[0].hasPrefix("-") && arguments[0].contains("/")
      && !arguments[1].hasPrefix("-") && isDirectory(arguments[1])
  }

  /// The `appbox mount` arguments for `SOURCE MOUNTPOINT [-o OPTIONS]…`.
  /// - Throws: a usage error for anything else after the two paths.
  static func mountArguments(_ arguments: [String]) throws(CLIError) -> [String] {
    var result = ["--backing", arguments[0]]
    var fuseOptions: [String] = []
    var index = 2
    while index < arguments.count {
      let argument = arguments[index]
      let list: String
      if argument == "-o", index + 1 < arguments.count {
        list = arguments[index + 1]
        index += 2
      } else if argument.hasPrefix("-o"), argument.count > 2 {
        list = String(argument.dropFirst(2))
        index += 1
      } else {
        throw CLIError(.usage, "unexpected \(argument): mount.fuse3 passes SOURCE MOUNTPOINT -o OPTIONS")
      }
      for option in list.split(separator: ",", omittingEmptySubsequences: true) {
        let (name, value) = split(option)
        if let flag = valueOptions[name] {
          guard let value, !value.isEmpty else { throw CLIError(.usage, "-o \(name) needs a value (\(name)=…)") }
          result += [flag, value]
        } else if let flag = flagOptions[name], value == nil {
          result.append(flag)
        } else {
          fuseOptions.append(String(option))
        }
      }
    }
    if !fuseOptions.isEmpty { result += ["-o", fuseOptions.joined(separator: ",")] }
    return result + [arguments[1]]
  }

  /// An option's name (with `_` read as `-`) and its value, if it has one.
  private static func split(_ option: Substring) -> (String, String?) {
    guard let equals = option.firstIndex(of: "=") else {
      return (option.replacingOccurrences(of: "_", with: "-"), nil)
    }
    let name = option[..<equals].replacingOccurrences(of: "_", with: "-")
    return (name, String(option[option.index(after: equals)...]))
  }
}
