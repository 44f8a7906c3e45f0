import Testing

@testable import AppBoxCLI

/// A usage error says what is wrong and where to read more, in two lines, never the whole
/// usage text; every subcommand answers `--help`, where the hint points.
@Suite("Usage errors")
struct UsageErrorTests {
  /// A wrong command line for each subcommand, refused before anything is done.
  static let wrong: [(command: String, arguments: [String])] = [
    ("mount", ["mount", "--backing"]), ("mount", ["mount", "--bogus", "/mnt"]), ("mount", ["mount"]),
    ("unmount", ["unmount"]), ("umount", ["umount", "a", "b"]), ("lock", ["lock"]), ("unlock", ["unlock", "a", "b"]),
    ("status", ["status", "--json", "--descriptors", "/mnt"]), ("purge", ["purge", "/mnt"]),
    ("drop-caches", ["drop-caches"]), ("events", ["events", "--bogus", "/mnt"]), ("resize", ["resize", "/mnt"]),
    ("pressure", ["pressure", "/mnt", "--schedule"]), ("report", ["report"]),
    ("experiment", ["experiment", "--", "true"]), ("protect", ["protect", "/mnt/file"]),
    ("backup", ["backup"]), ("restore", ["restore", "/backup"]), ("run", ["run", "program"]),
    // mount -t fuse.appbox's form: SOURCE MOUNTPOINT (an existing directory), then only -o.
    ("mount", ["/data/source", "/", "--bogus"]),
  ]

  @Test("a usage error is its message and 'see appbox COMMAND --help' (64)", arguments: wrong)
  func hintNotUsage(command: String, arguments: [String]) {
    do {
      _ = try AppBoxCommandLine.run(arguments)
      Issue.record("\(arguments) ran")
    } catch {
      #expect(error.code == .usage, "\(arguments): \(error.code) \(error.message)")
      let lines = error.message.split(separator: "\n", omittingEmptySubsequences: false)
      #expect(lines.count == 2, "\(arguments): \(error.message)")
      #expect(lines.last == "see appbox \(command) --help", "\(arguments): \(error.message)")
      #expect(!error.message.contains("usage:"), "\(arguments): \(error.message)")
    }
  }

  @Test("every subcommand answers --help (exit 0)", arguments: AppBoxCommandLine.subcommands)
  func help(command: String) {
    do {
      #expect(try AppBoxCommandLine.run([command, "--help"]) == .success)
    } catch {
      #expect(error.code == .success, "\(command) --help: \(error.code) \(error.message)")
      #expect(error.message.contains("usage: appbox"), "\(command) --help: \(error.message)")
    }
  }

  @Test("an unknown command names itself and appbox --help; appbox alone prints the help (64)")
  func topLevel() {
    do { _ = try AppBoxCommandLine.run(["frobnicate"]) } catch {
      #expect(error.code == .usage)
      #expect(error.message == "unknown command frobnicate; run appbox --help")
    }
    do { _ = try AppBoxCommandLine.run([]) } catch {
      #expect(error.code == .usage)
      #expect(error.message.contains("commands:"))
    }
  }
}
