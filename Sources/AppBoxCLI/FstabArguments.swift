/// The form `mount -t fuse.appbox` and `/etc/fstab` call AppBox in: mount.fuse3 runs
/// `appbox SOURCE MOUNTPOINT -o OPTIONS`, SOURCE being the backing directory. Every mount
/// option is then an `-o` option, which `appbox mount -o` reads as well
/// (``MountOptions``): this form only moves SOURCE and MOUNTPOINT to their places.
enum FstabArguments {
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
    var index = 2
    while index < arguments.count {
      let argument = arguments[index]
      if argument == "-o", index + 1 < arguments.count {
        result += ["-o", arguments[index + 1]]
        index += 2
      } else if argument.hasPrefix("-o"), argument.count > 2 {
        result.append(argument)
        index += 1
      } else {
        throw CLIError(.usage, "unexpected \(argument): mount.fuse3 passes SOURCE MOUNTPOINT -o OPTIONS")
      }
    }
    return result + [arguments[1]]
  }
}
