import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Every inode the kernel holds costs the daemon a descriptor: with more files than the
/// daemon may open, AppBox must ask the kernel to drop idle inodes instead of failing
/// lookups with EMFILE.
@Suite("Descriptor budget", .needsFUSE, .timeLimit(.minutes(10)))
struct DescriptorBudgetTests {
  @Test("3,000 files through a daemon limited to 512 descriptors: create, list with attributes, read, remove")
  func moreFilesThanDescriptors() throws {
    let directories = try SandboxDirectories(prefix: "appbox-fdtest")
    let backing = directories.backing
    let mountpoint = directories.mountpoint
    let mounted = try Command.run(
      "prlimit", ["--nofile=512:512", "--", Command.appbox, "mount", "--unlocked", "--backing", backing, mountpoint])
    try #require(mounted.status == 0, "\(mounted.error)")
    defer { _ = try? Command.run(Command.appbox, ["unmount", mountpoint]) }

    let directory = mountpoint + "/Documents/many"
    #expect(mkdir(directory, 0o755) == 0)
    for index in 0..<3000 {
      let fd = open(directory + "/f\(index)", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o644)
      try #require(fd >= 0, "create #\(index): errno \(errno)")
      var byte = UInt8(index & 0xff)
      #expect(write(fd, &byte, 1) == 1)
      close(fd)
    }
    let listing = try Command.shell("ls -l \(directory) | tail -n +2 | wc -l")
    #expect(listing.trimmingCharacters(in: .whitespacesAndNewlines) == "3000")
    for index in stride(from: 0, to: 3000, by: 7) {
      let fd = open(directory + "/f\(index)", O_RDONLY | O_CLOEXEC)
      try #require(fd >= 0, "open #\(index): errno \(errno)")
      var byte: UInt8 = 0
      #expect(read(fd, &byte, 1) == 1 && byte == UInt8(index & 0xff))
      close(fd)
    }
    for index in 0..<3000 { #expect(unlink(directory + "/f\(index)") == 0, "unlink #\(index): errno \(errno)") }
    let unmounted = try Command.run(Command.appbox, ["unmount", mountpoint])
    #expect(unmounted.status == 0, "\(unmounted.error)")
  }

  @Test("status states the daemon's descriptor limit and what it allows: about half as many open files")
  func statusStatesTheLimit() throws {
    let directories = try SandboxDirectories(prefix: "appbox-fdlimit")
    let mounted = try Command.run(
      "prlimit",
      ["--nofile=512:512", "--", Command.appbox, "mount", "--backing", directories.backing, directories.mountpoint])
    try #require(mounted.status == 0, "\(mounted.error)")
    defer { _ = try? Command.run(Command.appbox, ["unmount", directories.mountpoint]) }
    #expect(Quota.number(try Quota.status(directories.mountpoint), "descriptorLimit") == 512)
    let human = try Command.run(Command.appbox, ["status", directories.mountpoint])
    #expect(
      human.output.contains("at most 512") && human.output.contains("about 256 files open at once"), "\(human.output)")
    // 200 files held open at once (below the stated ~256) all open.
    var held: [Int32] = []
    defer { held.forEach { close($0) } }
    for index in 0..<200 {
      let fd = open(directories.mountpoint + "/Documents/h\(index)", O_CREAT | O_RDWR | O_CLOEXEC, 0o644)
      try #require(fd >= 0, "open #\(index): errno \(errno)")
      held.append(fd)
    }
  }
}
