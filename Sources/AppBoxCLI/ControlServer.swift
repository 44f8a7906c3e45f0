import AppBoxFS
import Foundation
import Posix
import SandboxPolicy
import Synchronization

/// The daemon's end of the control channel: a Unix socket, mode 0600 in a 0700 runtime
/// directory, that only the mounting user (or root) can reach; the peer's uid is checked
/// again on every connection. One request line in, one JSON line out (after progress
/// lines, for a purge asked with a trailing `progress`).
///
/// Requests: `lock`, `unlock`, `status`, `descriptors`, `drop-caches`, `purge bytes N`,
/// `purge domain caches|tmp`, `purge older-than SECONDS [caches|tmp]`, `resize BYTES
/// resize|schedule`, and `run allow|deny` (``DeviceControlGate``, which may refuse the
/// requests that change the device); on a device, `app-install BUNDLE-ID [GROUP-ID…]`,
/// `app-remove BUNDLE-ID`, `app-list` and `app-run BUNDLE-ID` (``ControlServer+Apps``).
/// Connections are served concurrently, each on a thread of its own, at most
/// ``maximumConnections`` at a time, of which the programs of refusing runs hold only a
/// share (``ControlConnectionShares``). Who connected is settled when the connection is
/// accepted: its credentials and a pidfd (``PeerProcess``), and the gate's reading of its
/// ancestry, bound to the connection (``DeviceControlGate/bind(_:isConnector:)``). Each
/// connection has a deadline: its whole request line, newline included, within
/// ``requestSeconds`` of the accept, however the bytes come; a line not finished by then,
/// or ended without its newline, is refused and never served. Each reply line is written
/// within ``replySeconds`` or given up. So an idle or trickling client holds a connection
/// for ``requestSeconds`` at most. Anything else a client sends gets an error reply and
/// changes nothing.
final class ControlServer: Sendable {
  private let listener: Int32
  let filesystem: SandboxFilesystem
  /// Where the filesystem is mounted (absolute, resolved).
  let mountpoint: String
  private let owner = Sys.effectiveUID
  /// Connections being served now.
  private let active = Mutex(0)
  /// Who may change the device: the runs of `appbox run` and their programs.
  private let gate: DeviceControlGate
  /// Called on a connection's thread once its peer is bound and admitted, before its
  /// request is read (tests: the moment after which what the peer does no longer changes
  /// how it is judged).
  private let bound: (@Sendable (DeviceControlGate.Peer) -> Void)?
  /// The runs of `appbox run --app` by app, which keep their app installed.
  let appRuns = AppRuns()
  /// Held while a removal checks for runs and removes, and while a run registers, so that
  /// no run starts in an app being removed. Lock order: taken before the filesystem's.
  let appChanges = Mutex(())

  /// Connections served at once; more are answered "busy" and closed.
  static let maximumConnections = 16
  /// How long a client has, from the accept of its connection, to send its whole request
  /// line.
  static let requestSeconds = 5.0
  /// How long each reply line (and each progress line) may take to be written.
  static let replySeconds = 5.0
  /// The longest request line.
  static let maximumRequestBytes = 4096
  /// Seconds the accept loop waits after a failed accept, doubled after each further
  /// failure in a row up to ``maximumBackOff``.
  static let minimumBackOff = 0.05
  /// The longest wait between failed accepts: how late the server may answer once the
  /// descriptors are back.
  static let maximumBackOff = 0.8

  /// A device's runs of `appbox run --app`, each confined to its app's containers; nil on
  /// a plain mount.
  let runGroups: RunGroups?

  /// A server listening on the socket `name` in the runtime directory open as
  /// `directory` (``MountFiles/socketName``), answering for `filesystem`, mounted at
  /// `mountpoint`, with `gate` as its barrier; `bound` is a test's hook.
  init(
    directory: Int32, socket name: String, filesystem: SandboxFilesystem, mountpoint: String,
    runGroups: RunGroups? = nil, gate: DeviceControlGate = DeviceControlGate(),
    bound: (@Sendable (DeviceControlGate.Peer) -> Void)? = nil
  ) throws(Errno) {
    listener = try UnixSocket.listen(in: directory, name)
    self.filesystem = filesystem
    self.mountpoint = mountpoint
    self.runGroups = runGroups
    self.gate = gate
    self.bound = bound
  }

  /// A server on the control socket of `files`.
  convenience init(
    files: MountFiles, filesystem: SandboxFilesystem, mountpoint: String, runGroups: RunGroups? = nil
  ) throws(Errno) {
    try self.init(
      directory: files.directory.fd, socket: files.socketName, filesystem: filesystem, mountpoint: mountpoint,
      runGroups: runGroups)
  }

  /// Accepts connections on a thread of its own until the process ends.
  func start() {
    let thread = Thread { [self] in
      var backOff = Self.minimumBackOff
      while true {
        let connection: Int32
        do { connection = try UnixSocket.accept(listener) } catch {
          // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): the pending
          // connection stays pending, so accepting again at once would spin. Give the
          // served connections time to end, longer after each failure in a row.
          Clock.sleep(seconds: backOff)
          backOff = min(backOff * 2, Self.maximumBackOff)
          continue
        }
        let accepted = Clock.monotonic()
        backOff = Self.minimumBackOff
        let admitted = active.withLock { count in
          guard count < Self.maximumConnections else { return false }
          count += 1
          return true
        }
        guard admitted else {
          // A new connection's send buffer is empty: this never waits.
          reply(connection, Self.error(Self.busy))
          Sys.close(connection)
          continue
        }
        let worker = Thread { [self] in
          serve(connection, deadline: accepted + Self.requestSeconds)
          Sys.close(connection)
          active.withLock { $0 -= 1 }
        }
        worker.name = "appbox-control-connection"
        worker.start()
      }
    }
    thread.name = "appbox-control"
    thread.start()
  }

  /// Serves one connection whose request line is due by `deadline`.
  private func serve(_ connection: Int32, deadline: Double) {
    let process: PeerProcess
    do { process = try PeerProcess.of(connection) } catch {
      reply(connection, Self.error("cannot identify the connecting process (SO_PEERCRED: \(error))"))
      return
    }
    let credentials = process.credentials
    guard credentials.uid == owner || credentials.uid == 0 else {
      reply(connection, Self.error("not the owner of this mount"))
      return
    }
    let peer = gate.bind(credentials.pid) { process.isStillThere }
    guard let holder = gate.admit(peer) else {
      reply(connection, Self.error(Self.busy))
      return
    }
    defer { gate.release(holder) }
    bound?(peer)
    let line: [UInt8]
    switch UnixSocket.readLine(connection, limit: Self.maximumRequestBytes, deadline: deadline) {
    case .line(let bytes): line = bytes
    case .tooLong:
      reply(connection, Self.error("request longer than \(Self.maximumRequestBytes) bytes"))
      return
    case .timedOut:
      reply(
        connection,
        Self.error(
          "no whole request line within \(Int(Self.requestSeconds)) s of connecting: nothing done"))
      return
    case .unterminated:
      reply(connection, Self.error("request without its newline: nothing done"))
      return
    case .failed:
      return  // the client is gone
    }
    var request = String(decoding: line, as: UTF8.self)
    var progress: PurgeProgress?
    let replies = ReplyLines(connection)
    if request.hasPrefix("purge "), request.hasSuffix(" progress") {
      request.removeLast(" progress".count)
      progress = replies.purgeProgress()
    }
    replies.write(gate.answer(request, from: peer) ?? handle(request, peer: peer, progress: progress))
  }

  /// Writes one reply line, within ``replySeconds`` (or not at all: the client is gone or
  /// does not read).
  private func reply(_ connection: Int32, _ text: String) {
    UnixSocket.writeAll(connection, Array((text + "\n").utf8), deadline: Clock.monotonic() + Self.replySeconds)
  }

  /// The lines written on one connection: progress lines, then the reply, each within
  /// ``replySeconds``; once one is not written in time (the client is gone or does not
  /// read), no more are, so a client that does not read holds a purge up once, no longer.
  private final class ReplyLines: Sendable {
    private let connection: Int32
    private let broken = Atomic<Bool>(false)

    init(_ connection: Int32) { self.connection = connection }

    /// Writes `text` and a newline, unless an earlier line was not taken in time.
    func write(_ text: String) {
      guard !broken.load(ordering: .acquiring) else { return }
      if !UnixSocket.writeAll(
        connection, Array((text + "\n").utf8), deadline: Clock.monotonic() + ControlServer.replySeconds)
      {
        broken.store(true, ordering: .releasing)
      }
    }

    /// Progress lines of a purge for a client that asked (`purge … progress`), paced
    /// (``ProgressPacer``), before the reply: `{"progress":true,"files":N,"bytes":B}`.
    /// One thread writes at a time; a report due while another is being written is
    /// dropped.
    func purgeProgress() -> PurgeProgress {
      let pacer = ProgressPacer()
      let writing = Atomic<Bool>(false)
      return { [self] files, bytes in
        guard pacer.due(), writing.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
        else { return }
        write("{\"progress\":true,\"files\":\(files),\"bytes\":\(bytes)}")
        writing.store(false, ordering: .releasing)
      }
    }
  }

  /// The error a connection over its share gets (``ControlClient`` tries again on it).
  static let busy = "busy: too many control connections, try again"

  /// An error reply.
  static func error(_ message: String) -> String {
    "{\"ok\":false,\"error\":\(JSONText.quoted(message))}"
  }

  /// An error reply with the exit code `appbox` exits with.
  static func error(_ message: String, code: ExitCode) -> String {
    "{\"ok\":false,\"error\":\(JSONText.quoted(message)),\"code\":\(code.rawValue)}"
  }

  /// A refusal of a request the peer may not make (`appbox` exits 77 on it).
  static func refusal(_ message: String) -> String {
    "{\"ok\":false,\"error\":\(JSONText.quoted(message)),\"refused\":true}"
  }

  /// Answers one request from `peer`, the process bound to the connection at its accept
  /// (`progress`: where a purge reports how far it got).
  func handle(_ request: String, peer: DeviceControlGate.Peer, progress: PurgeProgress? = nil) -> String {
    let words = request.split(separator: " ").map(String.init)
    if let verb = words.first, verb.hasPrefix("app-") { return handleApp(verb, Array(words.dropFirst()), peer: peer) }
    switch (words.first, words.count) {
    case ("lock", 1):
      return "{\"ok\":true,\"state\":\(JSONText.quoted(filesystem.lock().name))}"
    case ("unlock", 1):
      return "{\"ok\":true,\"state\":\(JSONText.quoted(filesystem.unlock().name))}"
    case ("status", 1):
      // The filesystem's status object, with the gate's counters as one more member.
      let status = filesystem.statusJSON()
      return "{\"ok\":true,\"status\":\(status.dropLast()),\"deviceControl\":\(gate.statusJSON)}}"
    case ("descriptors", 1):
      return Self.descriptorsReply()
    case ("write-back", 1):
      return "{\"ok\":true,\"files\":\(filesystem.writeBackCachedWrites())}"
    case ("drop-caches", 1):
      let inUse: Set<UInt64>
      do { inUse = try Sys.directoriesInUse(under: mountpoint) } catch {
        return Self.error(
          "cannot list the processes (/proc: \(error)), whose working directories stay: nothing dropped")
      }
      filesystem.dropKernelCaches(sparing: inUse)
      return "{\"ok\":true}"
    case ("purge", _):
      guard let purge = Self.purgeRequest(Array(words.dropFirst())) else {
        return Self.error("bad purge request: \(request.prefix(200))")
      }
      let (files, bytes) = filesystem.purge(purge, progress: progress)
      return "{\"ok\":true,\"files\":\(files),\"bytes\":\(bytes)}"
    case ("resize", 3):
      guard let bytes = Int64(words[1]), bytes >= MountRequest.minimumCapacity,
        let reason = CapacityChangeReason(rawValue: words[2])
      else {
        return Self.error(
          "bad resize request (a capacity of at least \(MountRequest.minimumCapacity) bytes, then resize or schedule): \(request.prefix(200))"
        )
      }
      let done = filesystem.resize(to: bytes, reason: reason)
      return
        "{\"ok\":true,\"from\":\(done.from),\"to\":\(done.to),\"files\":\(done.files),\"bytes\":\(done.bytes),\"used\":\(done.used)}"
    default:
      return Self.error("unknown request: \(request.prefix(200))")
    }
  }

  /// The daemon's own open descriptors (`/proc/self/fd`): what a test checks for leaked
  /// handles where it may not read another process's descriptors (root without
  /// CAP_SYS_PTRACE, as in a container, once the daemon served another user). `O_PATH`
  /// inode references (one per inode the kernel holds, thousands on a big tree) are
  /// counted, and listed only when their file was unlinked.
  static func descriptorsReply() -> String {
    let descriptors: [OwnDescriptor]
    do { descriptors = try Sys.ownDescriptors() } catch {
      return Self.error("cannot list /proc/self/fd: \(error)")
    }
    let unlinked = Array(" (deleted)".utf8)
    let listed = descriptors.filter { !$0.pathOnly || $0.target.suffix(unlinked.count).elementsEqual(unlinked) }
    let items = listed.map {
      "{\"fd\":\($0.fd),\"target\":\(JSONText.quoted(bytes: $0.target)),\"pathOnly\":\($0.pathOnly)}"
    }
    let references = descriptors.count { $0.pathOnly }
    return "{\"ok\":true,\"descriptors\":[" + items.joined(separator: ",") + "],\"inodeReferences\":\(references)}"
  }

  /// A purge request's words, checked: a byte count from 0 up, an age from 0 to
  /// ``MountRequest/maximumDuration`` seconds, a purgeable domain.
  static func purgeRequest(_ words: [String]) -> PurgeRequest? {
    switch (words.first, words.count) {
    case ("bytes", 2):
      guard let bytes = Int64(words[1]), bytes >= 0 else { return nil }
      return .bytes(bytes)
    case ("domain", 2):
      return StorageDomain(machineName: words[1]).flatMap { $0.isPurgeable ? .domain($0) : nil }
    case ("older-than", 2), ("older-than", 3):
      guard let seconds = Double(words[1]), seconds.isFinite, seconds >= 0, seconds <= MountRequest.maximumDuration
      else { return nil }
      let domain = words.count == 3 ? StorageDomain(machineName: words[2]) : nil
      if words.count == 3 && domain?.isPurgeable != true { return nil }
      return .olderThan(seconds: seconds, domain: domain)
    default:
      return nil
    }
  }
}
