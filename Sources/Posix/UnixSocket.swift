import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// Unix stream sockets for the control channel: line in, line out.
public enum UnixSocket {
  /// Binds and listens at `name` in the directory `directory` (a descriptor, `O_PATH` will
  /// do: the address goes through `/proc/self/fd`, so no path is resolved again), replacing
  /// a stale socket there; readable and writable by the owner only.
  public static func listen(in directory: Int32, _ name: String) throws(Errno) -> Int32 {
    let path = address(in: directory, name)
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw Errno.current }
    unlinkat(directory, name, 0)
    var address = try makeAddress(path)
    // The umask of a daemon is 0: create the socket under a private umask instead.
    let oldMask = umask(0o177)
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    umask(oldMask)
    // chmod through the directory's descriptor: in a directory only its owner may write,
    // the name is the socket just bound.
    guard bound == 0, chmod(path, 0o600) == 0, Glibc.listen(fd, 16) == 0 else {
      let error = Errno.current
      Glibc.close(fd)
      throw error
    }
    return fd
  }

  /// The address of `name` in the directory open as `directory`, through
  /// `/proc/self/fd/N` (short, and never resolved from the directory's path again).
  public static func address(in directory: Int32, _ name: String) -> String {
    "/proc/self/fd/\(directory)/\(name)"
  }

  /// Accepts one connection (close-on-exec).
  public static func accept(_ fd: Int32) throws(Errno) -> Int32 {
    try SyscallFaults.check(.accept)
    return try retryingEINTR { cposix_accept_cloexec(fd) }
  }

  /// Connects to the socket `name` in the directory open as `directory` (``address(in:_:)``).
  public static func connect(in directory: Int32, _ name: String) throws(Errno) -> Int32 {
    try connect(to: address(in: directory, name))
  }

  /// Connects to the socket at `path`.
  public static func connect(to path: String) throws(Errno) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw Errno.current }
    var address = try makeAddress(path)
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    guard connected == 0 else {
      let error = Errno.current
      Glibc.close(fd)
      throw error
    }
    return fd
  }

  /// Who is at the other end of a connected socket, as the kernel recorded it when the
  /// connection was made (`SO_PEERCRED`): it cannot be forged by the peer.
  public struct PeerCredentials: Equatable, Sendable {
    /// The peer's process id.
    public let pid: pid_t
    /// The peer's effective user id.
    public let uid: uid_t
    /// The peer's effective group id.
    public let gid: gid_t
  }

  /// The credentials of the process at the other end (`SO_PEERCRED`).
  public static func peerCredentials(_ fd: Int32) throws(Errno) -> PeerCredentials {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
    guard cposix_peer_credentials(fd, &pid, &uid, &gid) == 0 else { throw Errno.current }
    return PeerCredentials(pid: pid, uid: uid, gid: gid)
  }

  /// Bounds every blocking read and write on `fd` to `milliseconds` (`SO_RCVTIMEO`,
  /// `SO_SNDTIMEO`); a read that times out fails with `EAGAIN`. Each call waits up to the
  /// bound anew: for a limit on a whole exchange, read and write with a deadline instead
  /// (``readLine(_:limit:deadline:)``, ``writeAll(_:_:deadline:)``).
  public static func setTimeouts(_ fd: Int32, milliseconds: Int) throws(Errno) {
    try Sys.check(cposix_socket_timeouts(fd, milliseconds))
  }

  /// What ``readLine(_:limit:deadline:)`` read.
  public enum LineRead: Equatable, Sendable {
    /// A whole line, without its newline.
    case line([UInt8])
    /// The stream ended before a newline came: the bytes that did.
    case unterminated([UInt8])
    /// More than the limit came without a newline.
    case tooLong
    /// The deadline passed before a newline came.
    case timedOut
    /// A read failed.
    case failed(Errno)

    /// The line, if a whole one was read.
    public var line: [UInt8]? {
      if case .line(let bytes) = self { return bytes }
      return nil
    }
  }

  /// Reads up to the first newline, at most `limit` bytes, by `deadline` (seconds on
  /// ``Clock/monotonic()``; nil: no limit) however the bytes come: the time is the whole
  /// line's, not each read's. Bytes after the newline are dropped (one request or reply
  /// per connection).
  public static func readLine(_ fd: Int32, limit: Int = 1 << 20, deadline: Double?) -> LineRead {
    var line: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      if let deadline {
        switch wait(fd, for: Int16(POLLIN), until: deadline) {
        case .ready: break
        case .timedOut: return .timedOut
        case .failed(let error): return .failed(error)
        }
      }
      let count = chunk.withUnsafeMutableBytes {
        recv(fd, $0.baseAddress, $0.count, deadline == nil ? 0 : Int32(MSG_DONTWAIT))
      }
      if count < 0 {
        if errno == EINTR || errno == EAGAIN { continue }
        return .failed(Errno.current)
      }
      if count == 0 { return line.count <= limit ? .unterminated(line) : .tooLong }
      if let newline = chunk[..<count].firstIndex(of: 0x0A) {
        line += chunk[..<newline]
        return line.count <= limit ? .line(line) : .tooLong
      }
      line += chunk[..<count]
      if line.count > limit { return .tooLong }
    }
  }

  /// Writes all of `bytes` by `deadline` (seconds on ``Clock/monotonic()``), or as much as
  /// the peer takes by then: a peer that has gone makes it stop (`EPIPE`) without SIGPIPE
  /// (`MSG_NOSIGNAL`), so neither a client that closes early nor a daemon that died ends
  /// the other side, and one that reads slowly or not at all holds the writer no longer
  /// than the deadline.
  /// - Returns: whether all of `bytes` were written.
  @discardableResult
  public static func writeAll(_ fd: Int32, _ bytes: [UInt8], deadline: Double) -> Bool {
    var offset = 0
    while offset < bytes.count {
      guard case .ready = wait(fd, for: Int16(POLLOUT), until: deadline) else { return false }
      let count = bytes[offset...].withUnsafeBytes {
        Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
      }
      if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
      if count <= 0 { return false }
      offset += count
    }
    return true
  }

  /// Writes all of `bytes`, or as much as the peer takes, without a deadline (the socket's
  /// own timeouts, if any, bound each write); see ``writeAll(_:_:deadline:)``.
  public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
      let count = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      if count < 0 && errno == EINTR { continue }
      if count <= 0 { return }
      offset += count
    }
  }

  private enum Readiness {
    case ready
    case timedOut
    case failed(Errno)
  }

  /// Waits until `fd` is ready for `events` (or has hung up, which the next call reports),
  /// or `deadline` passes.
  private static func wait(_ fd: Int32, for events: Int16, until deadline: Double) -> Readiness {
    while true {
      let remaining = deadline - Clock.monotonic()
      guard remaining > 0 else { return .timedOut }
      var item = pollfd(fd: fd, events: events, revents: 0)
      let ready = poll(&item, 1, Int32(min(remaining * 1000, Double(Int32.max)).rounded(.up)))
      if ready > 0 { return .ready }
      if ready < 0 && errno != EINTR { return .failed(Errno.current) }
    }
  }

  private static func makeAddress(_ path: String) throws(Errno) -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw Errno.nameTooLong }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      raw.copyBytes(from: bytes)
      raw[bytes.count] = 0
    }
    return address
  }
}
