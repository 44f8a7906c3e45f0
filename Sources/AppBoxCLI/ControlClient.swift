import Foundation
import Posix

/// The CLI's end of the control channel. It believes only the daemon of the mount: the
/// mount table names the mount's owner, the socket must sit in that owner's private
/// runtime directory, and the process that answers must run as that owner (or root) and
/// be the daemon its pid file names.
enum ControlClient {
  /// A mounted AppBox sandbox, found from its mountpoint.
  struct Target {
    /// The resolved mountpoint.
    let mountpoint: String
    /// Who mounted it (the kernel's `user_id=`).
    let owner: uid_t
    /// The daemon's runtime files.
    let files: MountFiles
  }

  /// Resolves `path` to a mounted AppBox sandbox that the caller may control, and its
  /// daemon's runtime files.
  static func target(_ path: String) throws(CLIError) -> Target {
    let mountpoint = try ownedMount(path)
    let owner = mountpoint.owner
    let me = Sys.effectiveUID
    // Each directory opened once, after the checks of RuntimeDirectory.open; the socket,
    // pid file and event log are then reached through it.
    var directories = owner == me ? [try RuntimeDirectory.current()] : []
    directories += try RuntimeDirectory.standard(for: owner).filter { $0.path != directories.first?.path }
    for directory in directories where directory.owner == owner {
      let files = directory.files(for: mountpoint.path)
      guard let st = files.socketStatus() else { continue }
      if st.st_mode & S_IFMT == S_IFSOCK && st.st_uid == owner {
        return Target(mountpoint: mountpoint.path, owner: owner, files: files)
      }
    }
    let places =
      directories.isEmpty ? "uid \(owner)'s runtime directory" : directories.map(\.path).joined(separator: ", ")
    throw CLIError(
      .busy,
      "no AppBox daemon of \(mountpoint.path) found in \(places)"
        + (owner == me ? "" : "; run the command as the user who mounted it (uid \(owner))"))
  }

  /// Resolves `path` to an AppBox mountpoint and its owner; refuses a caller who is
  /// neither the owner nor root (77).
  static func ownedMount(_ path: String) throws(CLIError) -> (path: String, owner: uid_t) {
    let mountpoint: String
    do { mountpoint = try Sys.realpath(path) } catch { throw CLIError(.noInput, "\(path): \(error)") }
    guard let mount = try MountTable.mount(at: mountpoint), mount.isAppBox else {
      throw CLIError(.busy, "\(mountpoint) is not an AppBox mount (mount one with appbox mount \(mountpoint))")
    }
    guard let owner = mount.ownerUID else {
      throw CLIError(.failure, "the mount table names no owner (user_id) for \(mountpoint)")
    }
    let me = Sys.effectiveUID
    guard me == owner || me == 0 else {
      throw CLIError(.noPermission, "only the user who mounted \(mountpoint) (uid \(owner)) or root may control it")
    }
    return (mountpoint, owner)
  }

  /// How long a request turned away as busy (all of the daemon's connections, or its
  /// run's share of them, in use) is tried again: two seconds longer than a connection may
  /// wait for its request line (``ControlServer/requestSeconds``, a deadline from its
  /// accept), so that every connection held idle when the first try was turned away has
  /// ended by then, however it trickled, with time to spare on a loaded machine. (A
  /// connection doing work, a long purge, may hold on longer; a program reconnecting as
  /// fast as it can holds only its run's share, ``ControlConnectionShares``.)
  static let busyRetrySeconds = ControlServer.requestSeconds + 2

  /// Sends one request and returns the daemon's JSON reply, once the peer is known to be
  /// the mount's daemon. A request turned away as busy (before the daemon read it) is sent
  /// again, for up to ``busyRetrySeconds``.
  /// `progress` hears the progress lines that come before the reply (of a request that
  /// asked for them), decoded.
  static func send(
    _ request: String, to target: Target, timeoutSeconds: Int? = 60, progress: (([String: Any]) -> Void)? = nil
  ) throws(CLIError) -> String {
    let deadline = Clock.monotonic() + busyRetrySeconds
    var pause = 0.02
    var reply = try exchange(request, with: target, timeoutSeconds: timeoutSeconds, progress: progress)
    while object(reply)["error"] as? String == ControlServer.busy, Clock.monotonic() + pause < deadline {
      Clock.sleep(seconds: pause)
      pause = min(pause * 2, 0.5)
      reply = try exchange(request, with: target, timeoutSeconds: timeoutSeconds, progress: progress)
    }
    guard reply.hasPrefix("{\"ok\":true") else {
      let answer = object(reply)
      let message = answer["error"] as? String
      if message == "not the owner of this mount" {
        throw CLIError(.noPermission, "only the user who mounted \(target.mountpoint) (or root) may control it")
      }
      guard let message else {
        throw CLIError(.busy, "the daemon of \(target.mountpoint) gave no answer")
      }
      if answer["refused"] as? Bool == true { throw CLIError(.noPermission, message) }
      if let code = (answer["code"] as? Int).flatMap({ ExitCode(rawValue: Int32($0)) }) {
        throw CLIError(code, message)
      }
      throw CLIError(message == ControlServer.busy ? .busy : .failure, message)
    }
    return reply
  }

  /// One connection: the request out, the last line back (after the progress lines).
  private static func exchange(
    _ request: String, with target: Target, timeoutSeconds: Int?, progress: (([String: Any]) -> Void)?
  ) throws(CLIError) -> String {
    let fd: Int32
    do { fd = try target.files.connect() } catch {
      if error == .accessDenied || error == .notPermitted {
        throw CLIError(.noPermission, "only the user who mounted \(target.mountpoint) (or root) may control it")
      }
      throw CLIError(.busy, "no AppBox daemon answers for \(target.mountpoint) (\(error))")
    }
    defer { Sys.close(fd) }
    try verifyPeer(fd, of: target)
    // The whole exchange within timeoutSeconds (none: a purge or resize takes as long as
    // it takes), however slowly the bytes come.
    let deadline = timeoutSeconds.map { Clock.monotonic() + Double($0) }
    // Not taken whole: the reply says why (a daemon that answered "busy" at once and
    // closed), or there is none.
    UnixSocket.writeAll(fd, Array((request + "\n").utf8), deadline: deadline ?? .infinity)
    var reply = String(decoding: UnixSocket.readLine(fd, deadline: deadline).line ?? [], as: UTF8.self)
    while reply.hasPrefix("{\"progress\":") {
      progress?(object(reply))
      reply = String(decoding: UnixSocket.readLine(fd, deadline: deadline).line ?? [], as: UTF8.self)
    }
    return reply
  }

  /// Refuses a peer that is not the mount's daemon: it must run as the mount's owner (or
  /// root), and be the process the daemon's pid file names.
  static func verifyPeer(_ fd: Int32, of target: Target) throws(CLIError) {
    let peer: UnixSocket.PeerCredentials
    do { peer = try UnixSocket.peerCredentials(fd) } catch {
      throw CLIError(.osError, "cannot identify the process behind \(target.files.socket): \(error)")
    }
    // The daemon writes its pid file before it mounts, so a live daemon always has one.
    let daemon = target.files.daemonPID
    guard peer.uid == target.owner || peer.uid == 0, let daemon, daemon == peer.pid else {
      throw CLIError(
        .busy,
        "the control socket \(target.files.socket) is served by process \(peer.pid) (uid \(peer.uid)), not by the daemon of \(target.mountpoint)"
      )
    }
  }

  /// The reply as a dictionary; empty when it is not a JSON object (which ``send`` takes as
  /// no answer, an error).
  static func object(_ reply: String) -> [String: Any] {
    // Absent is the meaning: a reply that is no JSON object is no answer.
    (try? JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]) ?? [:]
  }
}
