import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// The bytes of a write request, as the driver holds them: libfuse's buffer vector (which
/// may sit in a pipe) in the FUSE bridge, a byte array in tests.
public protocol WriteData {
  /// How many bytes the request carries.
  var count: Int { get }

  /// How the bytes come: through the kernel's page cache or past it.
  var origin: WriteOrigin { get }

  /// Copies the first `limit` bytes (all when nil) to `fd` at `offset`.
  /// - Returns: the number of bytes written.
  /// - Throws: the write's ``Errno``.
  func write(to fd: Int32, at offset: off_t, limit: Int?) throws(Errno) -> Int
}

extension WriteData {
  /// A program's write through the kernel's page cache, unless the driver knows otherwise.
  public var origin: WriteOrigin { .buffered }
}

/// How the bytes of a write request come.
public enum WriteOrigin: Sendable {
  /// A program's write on a handle whose I/O goes through the kernel's page cache (which
  /// already holds the bytes), or one opened for direct I/O (see the handle's kind).
  case buffered
  /// A program's write past the page cache: its file was opened, or set, `O_DIRECT`.
  case direct
  /// The kernel writing back dirty pages of a shared mapping (the handle is any writable
  /// one of the file's).
  case writeback
}
