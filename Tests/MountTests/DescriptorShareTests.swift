import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The kernel holds every ancestor of a process's working directory, and the daemon a
/// descriptor for each: another user's process sitting deep in a tree must not leave the
/// mount's owner and root without descriptors (docs/architecture.md, "Descriptors").
@Suite("Descriptor share", .needsFUSE, .timeLimit(.minutes(3)))
struct DescriptorShareTests {
  @Test("another user sitting in a directory as deep as it can make: root still creates and reads files")
  func deepWorkingDirectoryOfAnotherUser() throws {
    let directories = try SandboxDirectories(prefix: "appbox-fdshare")
    #expect(chmod(directories.root, 0o755) == 0)
    // 512 descriptors: an inode budget of 320, of which another user may take 280.
    let mounted = try Command.run(
      "prlimit",
      [
        "--nofile=512:512", "--", Command.appbox, "mount", "--unlocked", "-o", "allow_other", "--backing",
        directories.backing, directories.mountpoint,
      ])
    try #require(mounted.status == 0, "\(mounted.error)")
    defer { _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint]) }
    let shared = directories.mountpoint + "/Documents/pub"
    #expect(mkdir(shared, 0o777) == 0 && chmod(shared, 0o777) == 0)
    let ready = directories.root + "/ready"
    #expect(mkdir(ready, 0o777) == 0 && chmod(ready, 0o777) == 0)
    // Makes and enters directories until refused, says how deep it got, and stays there
    // until the test is done.
    let script = """
      import os, sys, time
      os.chdir(sys.argv[1])
      depth, error = 0, 0
      while depth < 600:
          try:
              os.mkdir("d"); os.chdir("d"); depth += 1
          except OSError as e:
              error = e.errno; break
      open(sys.argv[2] + "/depth", "w").write(f"{depth} {error}")
      deadline = time.time() + 120
      while time.time() < deadline and not os.path.exists(sys.argv[2] + "/done"):
          time.sleep(0.05)
      """
    let holder = try OtherUser.start(65534, ["/usr/bin/python3", "-c", script, shared, ready])
    defer {
      _ = creat(ready + "/done", 0o644)
      holder.waitUntilExit()
    }
    #expect(Quota.poll(seconds: 60) { access(ready + "/depth", F_OK) == 0 }, "the other user's process got deep")
    let reached = String(decoding: try readFile(ready + "/depth"), as: UTF8.self).split(separator: " ")
    print("DescriptorShareTests: the other user got \(reached.first ?? "?") deep (errno \(reached.last ?? "?"))")
    #expect(reached.last == "\(EMFILE)", "stopped by EMFILE: \(reached)")
    #expect(Int(reached.first ?? "") ?? 0 < 300, "within its share: \(reached)")
    for index in 0..<20 {
      let path = directories.mountpoint + "/Documents/root-\(index)"
      let fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0o644)
      try #require(fd >= 0, "root's create #\(index): \(String(cString: strerror(errno)))")
      var byte = UInt8(index)
      #expect(pwrite(fd, &byte, 1, 0) == 1)
      close(fd)
      #expect(Quota.contents(path) == [UInt8(index)], "root reads #\(index) back")
    }
  }
}
