import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `/proc/self/mountinfo` is read to its end: with many mounts before an AppBox mount in
/// the table, the CLI still finds it. The extra mounts live in a mount namespace of the
/// test's own, so nothing else on the machine sees them.
@Suite("Mount table", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct MountTableTests {
  @Test("with 60 mounts (long paths) listed before it, status, lock, a second mount and unmount find the mount")
  func manyMounts() throws {
    let directories = try SandboxDirectories()
    let long = String(repeating: "m", count: 120)
    let script = """
      set -u
      cd "$1"; appbox="$2"
      mkdir extra
      for i in $(seq 1 60); do mkdir "extra/\(long)$i"; mount -t tmpfs -o size=1m t "extra/\(long)$i"; done
      cleanup() {
        "$appbox" unmount mnt >/dev/null 2>&1 || fusermount3 -uz mnt
        for i in $(seq 1 60); do umount "extra/\(long)$i"; done
      }
      trap cleanup EXIT
      echo "table $(wc -c </proc/self/mountinfo)"
      "$appbox" mount --unlocked --grace 0 --backing backing mnt; echo "mount $?"
      "$appbox" status mnt >/dev/null; echo "status $?"
      "$appbox" lock mnt; echo "lock $?"
      echo "state $(getfattr --only-values -n user.appbox.device-state mnt 2>/dev/null)"
      mkdir backing2
      "$appbox" mount --backing backing2 mnt 2>/dev/null; echo "second $?"
      echo "daemons $(grep -c ' '"$PWD"'/mnt ' /proc/self/mountinfo)"
      "$appbox" unmount mnt; echo "unmount $?"
      """
    let result = try Command.run(
      "/usr/bin/unshare",
      [
        "--mount", "--propagation", "private", "/bin/bash", "-c", script, "bash",
        directories.root, Command.appbox,
      ])
    let lines = Dictionary(
      result.output.split(separator: "\n").compactMap { line -> (String, String)? in
        let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
        return parts.count == 2 ? (parts[0], parts[1]) : nil
      }, uniquingKeysWith: { $1 })
    #expect((Int(lines["table"] ?? "") ?? 0) > 8192, "the table is not long: \(result.output)")
    #expect(lines["mount"] == "0", "\(result.output) \(result.error)")
    #expect(lines["status"] == "0", "\(result.output) \(result.error)")
    #expect(lines["lock"] == "0", "\(result.output) \(result.error)")
    #expect(lines["state"] == "LOCKED", "\(result.output)")
    #expect(lines["second"] == "75", "\(result.output)")
    #expect(lines["daemons"] == "1", "\(result.output)")
    #expect(lines["unmount"] == "0", "\(result.output) \(result.error)")
    #expect(!MountFixture.isMounted(directories.mountpoint))
  }
}
