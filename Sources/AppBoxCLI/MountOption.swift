/// One `appbox mount` option, declared once in ``MountOptions/all``: how it is written on
/// the command line and as an `-o` option (the form `mount -t fuse.appbox` and
/// `/etc/fstab` use), what it takes, its default, who may set it, its help line, and what
/// it does to the request. The parser, the help text, the fstab form and the check of the
/// documentation all read it from there.
struct MountOption: Sendable {
  /// Who may set an option.
  enum Access: Sendable, Equatable {
    /// Any user.
    case anyone
    /// Only root: for another user the kernel's FUSE mount would silently drop it.
    case root
    /// Nobody: AppBox sets it itself (the reason says why).
    case nobody(String)
  }

  /// What an option takes.
  enum Value: Sendable, Equatable {
    /// Nothing: it is on when given.
    case none
    /// A value, shown as the placeholder (`SIZE`, `DURATION`).
    case required(String)
  }

  /// An option's default as the documentation shows it.
  enum Default: Sendable, Equatable {
    /// No default worth stating (a FUSE option that is simply off).
    case unstated
    /// A value the option accepts that means the same as leaving the option out (a
    /// test checks that it does).
    case value(String)
    /// A default that is no value of the option (`off`, a rule); shown as written.
    case described(String)

    /// The text the help and the documentation show.
    var text: String? {
      switch self {
      case .unstated: nil
      case .value(let text), .described(let text): text
      }
    }
  }

  /// What the option belongs to.
  enum Kind: Sendable, Equatable {
    /// AppBox's own option (a flag, and an `-o` form unless it has none).
    case appbox
    /// A FUSE or kernel mount option: `-o` only, passed on to libfuse unless AppBox
    /// consumes it.
    case fuse
  }

  /// The `-o` name (`capacity`, `allow_other`); for AppBox's options also the flag
  /// without its `--`.
  let name: String
  /// AppBox's or FUSE's.
  let kind: Kind
  /// The command-line flag (`--capacity`), nil for FUSE options.
  let flag: String?
  /// A short flag (`-f`), if any.
  let shortFlag: String?
  /// Whether the option has an `-o` form (every FUSE option; AppBox's unless it makes
  /// no sense in an fstab line, such as `--foreground`).
  let hasOForm: Bool
  /// What it takes.
  let value: Value
  /// Its default.
  let defaultValue: Default
  /// Who may set it.
  let access: Access
  /// One line of help.
  let help: String
  /// Applies a given value to the request being parsed.
  let apply: Apply

  /// What applying an option does: `value` is nil for an option without one; `given` is
  /// the option as the user wrote it, for messages.
  typealias Apply =
    @Sendable (_ draft: inout MountRequest.Draft, _ value: String?, _ given: String) throws(CLIError)
    -> Void

  /// The `-o` name with `_` between words read as `-`, for lookups.
  var normalizedName: String { Self.normalized(name) }

  /// `name` with `_` read as `-`: `-o default_protection` and `-o default-protection`
  /// are the same option, as are `allow_other` and `allow-other`.
  static func normalized(_ name: some StringProtocol) -> String {
    String(name.map { $0 == "_" ? "-" : $0 })
  }

  /// The option as an `-o` item: `capacity=SIZE`, `bfu`, `allow_other`.
  var oForm: String? {
    guard hasOForm else { return nil }
    if case .required(let placeholder) = value { return "\(name)=\(placeholder)" }
    return name
  }

  /// The option as a flag: `--capacity SIZE`, `--bfu`.
  var flagForm: String? {
    guard let flag else { return nil }
    if case .required(let placeholder) = value { return "\(flag) \(placeholder)" }
    return flag
  }

  // MARK: - Declaring options

  /// AppBox's option `--NAME` (and `-o NAME`).
  static func appbox(
    _ name: String, _ value: Value, default defaultValue: Default, short: String? = nil, oForm: Bool = true,
    help: String, apply: @escaping Apply
  ) -> MountOption {
    MountOption(
      name: name, kind: .appbox, flag: "--" + name, shortFlag: short, hasOForm: oForm, value: value,
      defaultValue: defaultValue, access: .anyone, help: help, apply: apply)
  }

  /// A FUSE option `-o NAME` given to libfuse as written.
  static func fuse(
    _ name: String, _ value: Value = .none, default defaultValue: Default = .unstated, access: Access = .anyone,
    help: String,
    check: @escaping @Sendable (_ value: String, _ spelling: String) throws(CLIError) -> Void = { _, _ in }
  ) -> MountOption {
    MountOption(
      name: name, kind: .fuse, flag: nil, shortFlag: nil, hasOForm: true, value: value, defaultValue: defaultValue,
      access: access, help: help
    ) { (draft: inout MountRequest.Draft, given: String?, spelling: String) throws(CLIError) in
      if let given { try check(given, spelling) }
      draft.request.fuseOptions.append(given.map { "\(name)=\($0)" } ?? name)
    }
  }
}
