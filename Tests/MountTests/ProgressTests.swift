import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Long work (the mount's index, large purges) shows progress on a terminal, and nothing when standard error is not one.
@Suite("Progress on a terminal", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct ProgressTests {
  /// A backing tree large enough that its index and its purge report progress at least
  /// once with `environment`.
  static func largeBacking(_ directories: SandboxDirectories) throws {
    try Command.shell(
      """
      python3 - \(shellQuote(directories.backing + "/Library/Caches")) <<'PY'
      import os, sys
      for i in range(\(Self.files)):
          d = os.path.join(sys.argv[1], "d%03d" % (i // 1000))
          if i % 1000 == 0:
              os.makedirs(d)
          open(os.path.join(d, "f%d" % i), "w").close()
      PY
      """)
  }

  static let files = 20_000

  /// The environment with progress from the first report on: this machine may index the
  /// files faster than the half second a person waits before progress shows.
  static let environment = ProcessInfo.processInfo.environment.merging(["APPBOX_PROGRESS_AFTER": "0"]) { $1 }

  @Test("appbox mount and a purge of a large sandbox show progress and a final line on a terminal (a pty)")
  func mountOnTerminal() throws {
    let directories = try SandboxDirectories()
    try Self.largeBacking(directories)
    let mount = [Command.appbox, "mount", "--backing", directories.backing, directories.mountpoint]
    // `script` runs the command on a new pseudo-terminal and copies what it shows.
    let result = try Command.run(
      "script", ["-qec", mount.map(shellQuote).joined(separator: " "), "/dev/null"], environment: Self.environment)
    defer { _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint]) }
    #expect(result.status == 0, "\(result.output)\(result.error)")
    #expect(MountFixture.isMounted(directories.mountpoint))
    #expect(result.output.contains("appbox: indexing the sandbox: "), "\(result.output)")
    // Every entry: the files, their directories, the fixed layout.
    let final = result.output.split(separator: "\r").last { $0.contains("indexed the sandbox") }
    #expect(final?.contains("indexed the sandbox: 20,0") == true, "\(result.output)")
    #expect(result.output.hasSuffix(" s\r\n"), "a final line: \(result.output.suffix(80))")
    // A purge of them all: progress, then its result in place of the progress line.
    let purge = [Command.appbox, "purge", directories.mountpoint, "--domain", "caches", "--all"]
    let purged = try Command.run(
      "script", ["-qec", purge.map(shellQuote).joined(separator: " "), "/dev/null"], environment: Self.environment)
    #expect(purged.status == 0, "\(purged.output)\(purged.error)")
    #expect(purged.output.contains("appbox: purging: "), "\(purged.output)")
    #expect(purged.output.hasSuffix("\u{1B}[Kpurged \(Self.files) files, 0 B\r\n"), "\(purged.output.suffix(120))")
  }

  @Test("appbox mount and purge of the same sandbox print no progress when standard error is a pipe")
  func mountOnPipe() throws {
    let directories = try SandboxDirectories()
    try Self.largeBacking(directories)
    let result = try Command.run(
      Command.appbox, ["mount", "--backing", directories.backing, directories.mountpoint], environment: Self.environment)
    defer { _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint]) }
    #expect(result.status == 0, "\(result.error)")
    #expect(MountFixture.isMounted(directories.mountpoint))
    #expect(result.error.isEmpty, "\(result.error)")
    #expect(result.output.isEmpty, "\(result.output)")
    let purged = try Command.run(
      Command.appbox, ["purge", directories.mountpoint, "--domain", "caches", "--all"], environment: Self.environment)
    #expect(purged.status == 0, "\(purged.error)")
    #expect(purged.error.isEmpty, "\(purged.error)")
    #expect(purged.output == "purged \(Self.files) files, 0 B\n")
  }
}
