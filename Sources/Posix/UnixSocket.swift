import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// Unix stream sockets for the control channel: line in, line out.
public enum UnixSocket {
  /// Binds and listens at `path` (replacing a stale socket), readable and writable by the
  /// owner only.
  public static func listen(at path: String) throws(Errno) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw Errno.current }
    unlink(path)
    var address = try makeAddress(path)
    // The umask of a daemon is 0: create the socket under a private umask instead.
    let oldMask = umask(0o177)
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    umask(oldMask)
    guard bound == 0, chmod(path, 0o600) == 0, Glibc.listen(fd, 16) == 0 else {
      let error = Errno.current
      Glibc.close(fd)
      throw error
    }
    return fd
  }

  /// Accepts one connection (close-on-exec).
  public static func accept(_ fd: Int32) throws(Errno) -> Int32 {
    try SyscallFaults.check(.accept)
    return try retryingEINTR { cposix_accept_cloexec(fd) }
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
  /// `SO_SNDTIMEO`); a read that times out fails with `EAGAIN`.
  public static func setTimeouts(_ fd: Int32, milliseconds: Int) throws(Errno) {
    try Sys.check(cposix_socket_timeouts(fd, milliseconds))
  }

  /// Reads up to the first newline (or the end of the stream, or a timeout), at most
  /// `limit` bytes; nil when the line is longer than that. Bytes after the newline are
  /// dropped (one request or reply per connection).
  public static func readLine(_ fd: Int32, limit: Int = 1 << 20) -> [UInt8]? {
    var line: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if count < 0 && errno == EINTR { continue }
      if count <= 0 { return line.count <= limit ? line : nil }
      if let newline = chunk[..<count].firstIndex(of: 0x0A) {
        line += chunk[..<newline]
        return line.count <= limit ? line : nil
      }
      line += chunk[..<count]
      if line.count > limit { return nil }
    }
  }

  /// Writes all of `bytes`, or as much as the peer takes: a peer that has gone makes it
  /// stop (`EPIPE`) without SIGPIPE (`MSG_NOSIGNAL`), so neither a client that closes
  /// early nor a daemon that died ends the other side.
  public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
      let count = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      if count < 0 && errno == EINTR { continue }
      if count <= 0 { return }
      offset += count
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
