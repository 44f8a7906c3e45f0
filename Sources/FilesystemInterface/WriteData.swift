import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// The bytes of a write request, as the driver holds them: libfuse's buffer vector (which
/// may sit in a pipe) in the FUSE bridge, a byte array in tests.
public protocol WriteData {
  /// How many bytes the request carries.
  var count: Int { get }

  /// Copies the first `limit` bytes (all when nil) to `fd` at `offset`.
  /// - Returns: the number of bytes written.
  /// - Throws: the write's ``Errno``.
  func write(to fd: Int32, at offset: off_t, limit: Int?) throws(Errno) -> Int
}
