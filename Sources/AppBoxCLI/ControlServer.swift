import AppBoxFS
import Foundation
import Posix
import SandboxPolicy

/// The daemon's end of the control channel: a Unix socket, mode 0600 in a 0700 runtime
/// directory, that only the mounting user (or root) can reach; the peer's uid is checked
/// again on every connection. One request line in, one JSON line out.
///
/// Requests: `lock`, `unlock`, `status`, `purge bytes N`, `purge domain caches|tmp`,
/// `purge older-than SECONDS [caches|tmp]`.
final class ControlServer: @unchecked Sendable {
  // @unchecked: `listener` is set once before the thread starts and read only by it.
  private let listener: Int32
  private let filesystem: SandboxFilesystem
  private let owner = geteuid()

  init(path: String, filesystem: SandboxFilesystem) throws(Errno) {
    listener = try UnixSocket.listen(at: path)
    self.filesystem = filesystem
  }

  /// Serves connections on a thread of its own until the process ends.
  func start() {
    let thread = Thread { [self] in
      while true {
        guard let connection = try? UnixSocket.accept(listener) else { continue }
        serve(connection)
        close(connection)
      }
    }
    thread.name = "appbox-control"
    thread.start()
  }

  private func serve(_ connection: Int32) {
    guard let peer = UnixSocket.peerUID(connection), peer == owner || peer == 0 else {
      UnixSocket.writeAll(connection, Array("{\"ok\":false,\"error\":\"not the owner of this mount\"}\n".utf8))
      return
    }
    let request = String(decoding: UnixSocket.readLine(connection), as: UTF8.self)
    UnixSocket.writeAll(connection, Array((handle(request) + "\n").utf8))
  }

  /// Answers one request.
  func handle(_ request: String) -> String {
    let words = request.split(separator: " ").map(String.init)
    switch words.first {
    case "lock":
      return "{\"ok\":true,\"state\":\(JSONText.quoted(filesystem.lock().name))}"
    case "unlock":
      return "{\"ok\":true,\"state\":\(JSONText.quoted(filesystem.unlock().name))}"
    case "status":
      return "{\"ok\":true,\"status\":\(filesystem.statusJSON())}"
    case "purge":
      guard let purge = Self.purgeRequest(Array(words.dropFirst())) else {
        return "{\"ok\":false,\"error\":\(JSONText.quoted("bad purge request: \(request)"))}"
      }
      let (files, bytes) = filesystem.purge(purge)
      return "{\"ok\":true,\"files\":\(files),\"bytes\":\(bytes)}"
    default:
      return "{\"ok\":false,\"error\":\(JSONText.quoted("unknown request: \(request)"))}"
    }
  }

  static func purgeRequest(_ words: [String]) -> PurgeRequest? {
    switch (words.first, words.count) {
    case ("bytes", 2):
      return Int64(words[1]).map { .bytes($0) }
    case ("domain", 2):
      return StorageDomain(machineName: words[1]).flatMap { $0.isPurgeable ? .domain($0) : nil }
    case ("older-than", 2), ("older-than", 3):
      guard let seconds = Double(words[1]) else { return nil }
      let domain = words.count == 3 ? StorageDomain(machineName: words[2]) : nil
      if words.count == 3 && domain?.isPurgeable != true { return nil }
      return .olderThan(seconds: seconds, domain: domain)
    default:
      return nil
    }
  }
}
