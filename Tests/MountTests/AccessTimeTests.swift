import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `-o noatime` as on a local filesystem: reading or running a file or listing a directory
/// through the mount leaves their access times alone; without it they change (relatime).
@Suite("Access times", .needsFUSE, .timeLimit(.minutes(10)))
struct AccessTimeTests {
  /// An access time long before the files' modification: relatime would update it.
  static let oldAccessTime = 1_000_000

  /// Sets the access time of `path` in the backing directory to ``oldAccessTime``.
  static func ageAccessTime(_ path: String) throws {
    var times = [
      timespec(tv_sec: oldAccessTime, tv_nsec: 0), timespec(tv_sec: 0, tv_nsec: Int(LinuxConstants.UTIME_OMIT)),
    ]
    try check(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW), "utimensat \(path)")
  }

  @Test(
    "reads, runs and listings change backing access times only without noatime",
    arguments: [
      (["-o", "noatime"], false), (["-o", "noatime", "--no-passthrough"], false), (["-o", "relatime"], true),
      ([], true),
    ])
  func readsLeaveAccessTimes(options: [String], changes: Bool) throws {
    let fixture = try MountFixture.unlocked(options) { backing in
      try FileManager.default.createDirectory(atPath: backing + "/Documents/d", withIntermediateDirectories: true)
      try writeFile(backing + "/Documents/d/file", bytes("contents"))
      try writeFile(backing + "/Documents/d/tool", bytes("#!/bin/sh\necho ran\n"))
      try check(chmod(backing + "/Documents/d/tool", 0o755), "chmod tool")
      for path in ["Documents/d/file", "Documents/d/tool", "Documents/d"] {
        try Self.ageAccessTime(backing + "/" + path)
      }
    }
    #expect(try readFile(fixture.path("Documents/d/file")) == bytes("contents"))
    #expect(try directoryNames(fixture.path("Documents/d")).contains("file"))
    let ran = try Command.run(fixture.path("Documents/d/tool"), [])
    #expect(ran.output == "ran\n", "\(ran.error)")
    for path in ["Documents/d/file", "Documents/d/tool", "Documents/d"] {
      let accessed = try statPath(fixture.backingPath(path)).st_atim.tv_sec
      #expect(
        (accessed != Self.oldAccessTime) == changes,
        "\(options): access time of \(path) is \(accessed) (was \(Self.oldAccessTime))")
    }
    try fixture.unmount()
  }
}
