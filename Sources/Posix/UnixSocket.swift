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

  /// Accepts one connection.
  public static func accept(_ fd: Int32) throws(Errno) -> Int32 {
    let connection = try retryingEINTR { Glibc.accept(fd, nil, nil) }
    _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
    return connection
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

  /// The user id of the process at the other end.
  public static func peerUID(_ fd: Int32) -> uid_t? {
    let uid = cposix_peer_uid(fd)
    return uid < 0 ? nil : uid_t(uid)
  }

  /// Reads up to the first newline (or the end), at most `limit` bytes.
  public static func readLine(_ fd: Int32, limit: Int = 1 << 20) -> [UInt8] {
    var line: [UInt8] = []
    var byte: UInt8 = 0
    while line.count < limit {
      let count = Glibc.read(fd, &byte, 1)
      if count < 0 && errno == EINTR { continue }
      if count <= 0 || byte == 0x0A { break }
      line.append(byte)
    }
    return line
  }

  /// Writes all of `bytes`.
  public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
      let count = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
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
