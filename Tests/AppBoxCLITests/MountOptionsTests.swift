import Foundation
import Testing

@testable import AppBoxCLI

/// `appbox mount`'s options, parsed without mounting: each option of the table in each of
/// its forms, who may set it, its default, and the fstab form.
@Suite("Mount options")
struct MountOptionsTests {
  /// A value each placeholder accepts, other than any default.
  static let sample: [String: String] = [
    "DIR": "/data/app", "SIZE": "2G", "DURATION": "5s", "CLASS": "complete", "PERCENT": "75%",
    "POLICY": "fifo", "COUNT": "7", "MICROSECONDS": "5", "BYTES": "8192", "NAME": "my-source",
    "TRANSPORT": "dev-fuse",
  ]

  /// The request's every field, to compare two requests whole.
  static func dump(_ request: MountRequest) -> String {
    var request = request
    request.oItems = []  // how the options were spelled, not what they ask for
    return String(reflecting: request)
  }

  static func parse(_ arguments: [String], isRoot: Bool = true) throws(CLIError) -> MountRequest {
    try MountRequest.parse(arguments + ["/mnt"], isRoot: isRoot)
  }

  static var settable: [MountOption] {
    MountOptions.all.filter { if case .nobody = $0.access { false } else { true } }
  }

  @Test("no two options share a flag or an -o name")
  func namesAreUnique() {
    let flags = MountOptions.all.flatMap { [$0.flag, $0.shortFlag].compactMap { $0 } }
    #expect(Set(flags).count == flags.count, "\(flags)")
    let names = MountOptions.all.filter(\.hasOForm).map(\.normalizedName)
    #expect(Set(names).count == names.count, "\(names)")
  }

  @Test("an option given as a flag and as -o asks for the same", arguments: MountOptions.appboxOptions)
  func flagAndOFormAgree(option: MountOption) throws {
    guard option.hasOForm, let flag = option.flag else { return }
    var value: String?
    if case .required(let placeholder) = option.value {
      value = Self.sample[placeholder]
      #expect(value != nil, "no sample value for \(placeholder)")
    }
    // --purge-to goes with --purge-at.
    let context = option.name == "purge-to" ? ["--purge-at", "90%"] : []
    let suffix = value.map { "=" + $0 } ?? ""
    let byFlag = try Self.parse(context + [flag] + (value.map { [$0] } ?? []))
    let byO = try Self.parse(context + ["-o", option.name + suffix])
    let underscored = try Self.parse(context + ["-o", option.name.replacingOccurrences(of: "-", with: "_") + suffix])
    #expect(Self.dump(byFlag) == Self.dump(byO))
    #expect(Self.dump(byFlag) == Self.dump(underscored))
    #expect(Self.dump(byFlag) != Self.dump(try Self.parse(context)) || option.name == "unlocked", "\(flag) did nothing")
    if let value {
      #expect(Self.dump(try Self.parse(context + ["\(flag)=\(value)"])) == Self.dump(byFlag), "\(flag)=VALUE")
    }
  }

  @Test("a default the table states as a value means what leaving the option out means", arguments: MountOptions.all)
  func defaultsAgree(option: MountOption) throws {
    guard case .value(let text) = option.defaultValue else { return }
    let given = option.flag.map { [$0, text] } ?? ["-o", "\(option.name)=\(text)"]
    var withDefault = try Self.parse(given)
    let without = try Self.parse([])
    // fsname=appbox is what the daemon sets when none is given.
    if option.name == "fsname" {
      #expect(withDefault.fsname == "appbox" && without.fsname == nil)
      withDefault.fsname = nil
    }
    #expect(Self.dump(withDefault) == Self.dump(without))
  }

  @Test("every FUSE option goes to libfuse as the table spells it, but nonempty, fsname and the access times")
  func fuseOptionsPassOn() throws {
    for option in MountOptions.fuseOptions {
      if case .nobody = option.access { continue }
      let item: String
      if case .required(let placeholder) = option.value {
        item = "\(option.name)=\(Self.sample[placeholder] ?? "?")"
      } else {
        item = option.name
      }
      let request = try Self.parse(["-o", item])
      switch option.name {
      case "fsname": #expect(request.fsname == "my-source" && request.fuseOptions.isEmpty)
      case "atime", "relatime": #expect(request.fuseOptions.isEmpty && !request.sandbox.noAccessTime)
      case "noatime":
        #expect(request.fuseOptions == ["noatime"] && request.sandbox.noAccessTime && !request.passthrough)
      default: #expect(request.fuseOptions == [item], "\(item)")
      }
    }
  }

  @Test("-o max_read takes 1 to 2^32-1 bytes and goes both to libfuse and to the INIT reply")
  func maxRead() throws {
    let request = try Self.parse(["-o", "max_read=8192,max_read=4096"])
    #expect(request.maxRead == 4096)
    #expect(request.fuseOptions == ["max_read=4096"], "the last one counts, once")
    for bad in ["abc", "0", "-1", "4294967296", "4k"] {
      #expect(throws: CLIError.self, "max_read=\(bad)") { try Self.parse(["-o", "max_read=\(bad)"]) }
      do { _ = try Self.parse(["-o", "max_read=\(bad)"]) } catch { #expect(error.code == .badValue) }
    }
  }

  @Test("suid and dev are root's: another user gets 77 and a reason, root gets them", arguments: ["suid", "dev"])
  func rootOnly(option: String) throws {
    do {
      _ = try Self.parse(["-o", "allow_other,\(option)"], isRoot: false)
      Issue.record("-o \(option) accepted for a user")
    } catch {
      #expect(error.code == .noPermission)
      #expect(error.message.contains("only root") && error.message.contains(option), "\(error.message)")
    }
    #expect(try Self.parse(["-o", option], isRoot: true).fuseOptions == [option])
    #expect(try Self.parse(["-o", "no\(option)"], isRoot: false).fuseOptions == ["no\(option)"])
  }

  @Test("-o fsname names the source; subtype stays refused (64)")
  func fsnameAndSubtype() throws {
    #expect(try Self.parse(["-o", "fsname=app1"]).fsname == "app1")
    #expect(try Self.parse(["-o", "fsname=/data/app 1"]).fsname == "/data/app 1")
    for bad in ["fsname=a\\b", "fsname=a\tb"] {
      do { _ = try Self.parse(["-o", bad]); Issue.record("\(bad) accepted") } catch {
        #expect(error.code == .badValue)
      }
    }
    for reserved in ["subtype=x", "allow_other,subtype=appbox"] {
      do { _ = try Self.parse(["-o", reserved]); Issue.record("\(reserved) accepted") } catch {
        #expect(error.code == .usage)
        #expect(error.message.contains("fuse.appbox"), "\(error.message)")
      }
    }
  }

  @Test("--nonempty and -o nonempty ask AppBox, not libfuse (which refuses it)")
  func nonempty() throws {
    for arguments in [["--nonempty"], ["-o", "nonempty"], ["-o", "ro,nonempty"]] {
      let request = try Self.parse(arguments)
      #expect(request.nonempty, "\(arguments)")
      #expect(!request.fuseOptions.contains("nonempty"), "\(arguments)")
    }
    #expect(try !Self.parse([]).nonempty)
  }

  @Test(
    "what is wrong says so in one line: unknown, missing or extra values and arguments (64), bad values (65)",
    arguments: [
      (["--bogus"], ExitCode.usage), (["-o", "bogus"], .usage), (["-o", "bfu=1"], .usage),
      (["-o", "capacity"], .usage), (["-o", "capacity="], .usage), (["-o", "fsname="], .usage),
      (["--bfu=1"], .usage), (["--capacity", "lots"], .badValue), (["-o", "capacity=lots"], .badValue),
      (["-o", "grace=5x"], .badValue), (["--purge-to", "50%"], .usage), (["extra"], .usage),
      (["--backing="], .usage),
    ])
  func oneLineErrors(arguments: [String], code: ExitCode) {
    do {
      _ = try Self.parse(arguments)
      Issue.record("\(arguments) accepted")
    } catch {
      #expect(error.code == code, "\(arguments): \(error.message)")
      #expect(!error.message.contains("\n"), "\(arguments): \(error.message)")
      #expect(!error.message.contains("usage:"), "\(arguments): \(error.message)")
    }
  }

  @Test("a flag's missing value is named, with no usage text: the --backing of the issue")
  func missingValue() {
    do {
      _ = try MountRequest.parse(["--backing"], isRoot: true)
      Issue.record("accepted")
    } catch {
      #expect(error.code == .usage)
      #expect(error.message == "--backing needs a value")
    }
  }

  @Test(
    "the fstab form mounts what the flags ask for: appbox mount --fstab, then mount.fuse3's call",
    arguments: [
      ["--capacity", "64M", "--grace", "0", "--bfu"],
      ["--backing", "/data/app1", "--default-protection", "none", "--purge-at", "90%", "--purge-to", "70%"],
      ["-o", "allow_other,noatime", "--nonempty", "--tmp-max-age", "3d", "-o", "fsname=app1"],
      ["--no-passthrough", "--handles", "0", "--busy-poll", "0", "--usage-interval=0", "--purge-policy", "largest"],
      [],
    ])
  func fstabRoundTrip(arguments: [String]) throws {
    let request = try MountRequest.parse(arguments + ["/mnt/app1"], isRoot: true)
    let line = MountOptions.fstabLine(request, backing: request.backing ?? "/data/default", mountpoint: "/mnt/app1")
    let fields = line.split(separator: " ").map(String.init)
    try #require(fields.count == 6, "\(line)")
    #expect(fields[2] == "fuse.appbox" && fields[1] == "/mnt/app1", "\(line)")
    // What mount.fuse3 runs for that line: appbox SOURCE MOUNTPOINT -o OPTIONS.
    let call = [fields[0], fields[1]] + (fields[3] == "defaults" ? [] : ["-o", fields[3]])
    let mounted = try MountRequest.parse(try FstabArguments.mountArguments(call), isRoot: true)
    var expected = request
    expected.backing = request.backing ?? "/data/default"
    #expect(Self.dump(mounted) == Self.dump(expected), "\(line)")
  }

  @Test("an fstab line escapes blanks in its fields")
  func fstabEscapes() throws {
    let request = try MountRequest.parse(["-o", "fsname=my app", "/mnt/a b"], isRoot: true)
    let line = MountOptions.fstabLine(request, backing: "/data/a b", mountpoint: "/mnt/a b")
    #expect(line == "/data/a\\040b /mnt/a\\040b fuse.appbox fsname=my\\040app 0 0")
  }

  @Test("the flags that take a value, for appbox run, come from the table")
  func runValueOptions() {
    #expect(RunPlan.valueOptions.isSuperset(of: ["--backing", "-o", "--capacity", "--grace", "--busy-poll"]))
    #expect(!RunPlan.valueOptions.contains("--bfu") && !RunPlan.valueOptions.contains("--nonempty"))
  }

  @Test("the help lists every settable option in every form, in at most 88 columns")
  func help() {
    let help = MountOptions.usage
    for option in Self.settable {
      for form in [option.flagForm, option.oForm.map { "-o " + $0 }].compactMap({ $0 }) {
        #expect(help.contains(form), "\(form) missing from the help")
      }
    }
    for line in help.split(separator: "\n") { #expect(line.count <= MountOptions.helpWidth, "\(line)") }
  }
}
