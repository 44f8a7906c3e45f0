import Foundation
import Posix

/// The CLI's end of the control channel.
enum ControlClient {
  /// A mounted AppBox sandbox, found from its mountpoint.
  struct Target {
    let mountpoint: String
    let files: MountFiles
  }

  /// Resolves `path` to a mounted AppBox sandbox and its runtime files.
  static func target(_ path: String) throws(CLIError) -> Target {
    guard let resolved = realpath(path, nil) else { throw CLIError(.noInput, "\(path) does not exist") }
    let mountpoint = String(cString: resolved)
    free(resolved)
    guard let mount = MountTable.mount(at: mountpoint), mount.type == "fuse.appbox" else {
      throw CLIError(.busy, "\(mountpoint) is not an AppBox mount (mount one with appbox mount \(mountpoint))")
    }
    var files = try RuntimeDirectory.current().files(for: mountpoint)
    if geteuid() == 0, access(files.socket, F_OK) != 0, let other = RuntimeDirectory.othersFiles(for: mountpoint) {
      files = other
    }
    return Target(mountpoint: mountpoint, files: files)
  }

  /// Sends one request and returns the daemon's JSON reply.
  static func send(_ request: String, to target: Target) throws(CLIError) -> String {
    let fd: Int32
    do { fd = try UnixSocket.connect(to: target.files.socket) } catch {
      if error == .accessDenied || error == .notPermitted {
        throw CLIError(.noPermission, "only the user who mounted \(target.mountpoint) (or root) may control it")
      }
      throw CLIError(
        .busy, "no AppBox daemon answers for \(target.mountpoint) (\(error)); was it mounted by another user?")
    }
    defer { close(fd) }
    UnixSocket.writeAll(fd, Array((request + "\n").utf8))
    let reply = String(decoding: UnixSocket.readLine(fd), as: UTF8.self)
    guard reply.hasPrefix("{\"ok\":true") else {
      let message = (try? JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any])?["error"] as? String
      if message == "not the owner of this mount" {
        throw CLIError(.noPermission, "only the user who mounted \(target.mountpoint) (or root) may control it")
      }
      throw CLIError(.failure, message ?? "the daemon gave no answer")
    }
    return reply
  }

  /// The reply as a dictionary.
  static func object(_ reply: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]) ?? [:]
  }
}
