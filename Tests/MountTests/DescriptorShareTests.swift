import Foundation
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon holds a descriptor for each inode the kernel holds (every ancestor of a
/// process's working directory included) and for each open handle: another user's
/// processes must not leave the mount's owner and root without descriptors
/// (docs/architecture.md, "Descriptors").
@Suite("Descriptor share", .needsFUSE, .timeLimit(.minutes(3)))
struct DescriptorShareTests {
  @Test("another user sitting in a directory as deep as it can make: root still creates and reads files")
  func deepWorkingDirectoryOfAnotherUser() throws {
    // Makes and enters directories until refused.
    let (reached, error) = try Self.rootWorksWhileHeld(
      """
      os.chdir(sys.argv[1])
      while count < 600:
          try:
              os.mkdir("d"); os.chdir("d"); count += 1
          except OSError as e:
              error = e.errno; break
      """)
    #expect(error == EMFILE, "stopped by EMFILE")
    #expect(reached < 300, "within its share of the 320 inodes")
  }

  @Test("another user holding open as many files as the daemon lets it: root still creates and reads files")
  func filesHeldOpenByAnotherUser() throws {
    // Creates files and keeps them open until refused.
    let (_, error) = try Self.rootWorksWhileHeld(
      """
      held = []
      while count < 600:
          try:
              held.append(os.open(f"{sys.argv[1]}/f{count}", os.O_CREAT | os.O_RDWR, 0o644)); count += 1
          except OSError as e:
              error = e.errno; break
      """)
    #expect(error == EMFILE, "stopped by EMFILE")
  }

  /// Mounts a sandbox as root with 512 descriptors (an inode budget of 320; another user
  /// may take 280 inodes, 392 descriptors in all) and `allow_other`, runs `body` (Python,
  /// counting in `count`, the errno that stopped it in `error`) as uid 65534 in a
  /// world-writable `Documents/pub` (`sys.argv[1]`) and keeps it running while root
  /// creates, writes and reads back 20 files.
  /// - Returns: how far `body` got, and the errno that stopped it.
  static func rootWorksWhileHeld(_ body: String) throws -> (count: Int, error: Int32) {
    let directories = try SandboxDirectories(prefix: "appbox-fdshare")
    #expect(chmod(directories.root, 0o755) == 0)
    let mounted = try Command.run(
      "prlimit",
      [
        "--nofile=512:512", "--", Command.appbox, "mount", "--unlocked", "-o", "allow_other", "--backing",
        directories.backing, directories.mountpoint,
      ])
    try #require(mounted.status == 0, "\(mounted.error)")
    defer { _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint]) }
    let shared = directories.mountpoint + "/Documents/pub"
    let ready = directories.root + "/ready"
    for directory in [shared, ready] { #expect(mkdir(directory, 0o777) == 0 && chmod(directory, 0o777) == 0) }
    // Reports how far it got (renamed into place: the test reads it as soon as the name
    // exists), then holds what it has until the test is done.
    let script =
      "import os, sys, time\ncount, error = 0, 0\n" + body + """

        with open(sys.argv[2] + "/count.tmp", "w") as f:
            f.write(f"{count} {error}")
        os.rename(sys.argv[2] + "/count.tmp", sys.argv[2] + "/count")
        deadline = time.time() + 120
        while time.time() < deadline and not os.path.exists(sys.argv[2] + "/done"):
            time.sleep(0.05)
        """
    let holder = try OtherUser.start(65534, ["/usr/bin/python3", "-c", script, shared, ready])
    defer {
      _ = creat(ready + "/done", 0o644)
      // Reaped here, not by Foundation's `waitUntilExit` (see ScriptProcess).
      let pid = holder.processIdentifier
      if !Spawn.waitForExit(pid, milliseconds: 30_000) { kill(pid, SIGKILL) }
      _ = Spawn.wait(pid)
    }
    try #require(Quota.poll(seconds: 60) { access(ready + "/count", F_OK) == 0 }, "the other user's process ran")
    let words = String(decoding: try readFile(ready + "/count"), as: UTF8.self).split(separator: " ")
    let reached = (count: Int(words.first ?? "") ?? -1, error: Int32(words.last ?? "") ?? -1)
    print("DescriptorShareTests: the other user got to \(reached.count) (errno \(reached.error))")
    for index in 0..<20 {
      let path = directories.mountpoint + "/Documents/root-\(index)"
      let fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0o644)
      try #require(fd >= 0, "root's create #\(index): \(String(cString: strerror(errno)))")
      var byte = UInt8(index)
      #expect(pwrite(fd, &byte, 1, 0) == 1)
      close(fd)
      #expect(Quota.contents(path) == [UInt8(index)], "root reads #\(index) back")
    }
    return reached
  }
}
