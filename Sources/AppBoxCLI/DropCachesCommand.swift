import Foundation
import Posix

/// `appbox drop-caches MOUNTPOINT`: the kernel forgets the mount's files and directories
/// that no program holds (names, attributes, cached pages), as `echo 2 >
/// /proc/sys/vm/drop_caches` does for every filesystem, but for this mount only, and
/// for its owner without root (a container's `/proc/sys` is read-only). For cold-cache
/// measurements and for tests of what happens after the kernel forgot an inode.
enum DropCachesCommand {
  /// How long the command waits for the kernel's forgets to reach the daemon.
  static let patience = 5.0

  static func run(_ arguments: [String]) throws(CLIError) -> ExitCode {
    let mountpoint = try ControlCommands.single(arguments, usage: "usage: appbox drop-caches MOUNTPOINT")
    let target = try ControlClient.target(mountpoint)
    let before = try nodes(target)
    _ = try ControlClient.send("drop-caches", to: target)
    // The kernel lets go at once, but its forgets reach the daemon as requests: wait until
    // the count of nodes stops falling (four polls in a row), or for the patience.
    var held = try nodes(target)
    var unchanged = 0
    let deadline = Clock.monotonic() + patience
    while unchanged < 4 && Clock.monotonic() < deadline {
      Clock.sleep(seconds: 0.05)
      let now = try nodes(target)
      unchanged = now == held ? unchanged + 1 : 0
      held = now
    }
    print("the kernel forgot \(max(0, before - held)) of the mount's files and directories; \(held) still held")
    return .success
  }

  /// The nodes the daemon serves for the kernel now (status `nodes`).
  private static func nodes(_ target: ControlClient.Target) throws(CLIError) -> Int {
    let status = ControlClient.object(try ControlClient.send("status", to: target))["status"] as? [String: Any]
    guard let nodes = (status?["nodes"] as? NSNumber)?.intValue else {
      throw CLIError(.failure, "the daemon of \(target.mountpoint) did not report its nodes")
    }
    return nodes
  }
}
