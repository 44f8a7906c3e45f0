import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// An error number from a failed system call, with Swift names for the ones AppBox uses.
///
/// Request handlers throw `Errno`; the FUSE bridge is the only place that turns one into a
/// reply (`fuse_reply_err`). A syscall's errno passes through unchanged.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
  /// The positive C `errno` value.
  public let rawValue: Int32

  /// Wraps a positive C `errno` value.
  @inlinable public init(rawValue: Int32) { self.rawValue = rawValue }

  /// The calling thread's current `errno`.
  @inlinable public static var current: Errno { Errno(rawValue: errno) }

  /// `strerror` text, for messages.
  public var description: String { String(cString: strerror(rawValue)) }

  /// The C constant's name (`EIO`), for logs that programs read; `errno N` for a value
  /// without one.
  public var name: String { cposix_errno_name(rawValue).map { String(cString: $0) } ?? "errno \(rawValue)" }

  /// Operation not permitted (`EPERM`): AppBox's refusal while the device is locked.
  public static let notPermitted = Errno(rawValue: EPERM)
  /// No such file or directory (`ENOENT`).
  public static let noEntry = Errno(rawValue: ENOENT)
  /// Stale file handle (`ESTALE`): an open of a file that was purged since the kernel
  /// looked it up; the kernel then looks the name up again and retries once.
  public static let stale = Errno(rawValue: ESTALE)
  /// Interrupted system call (`EINTR`).
  public static let interrupted = Errno(rawValue: EINTR)
  /// Input/output error (`EIO`).
  public static let ioError = Errno(rawValue: EIO)
  /// Bad file descriptor (`EBADF`).
  public static let badFileDescriptor = Errno(rawValue: EBADF)
  /// Permission denied by mode bits (`EACCES`).
  public static let accessDenied = Errno(rawValue: EACCES)
  /// Device or resource busy (`EBUSY`).
  public static let busy = Errno(rawValue: EBUSY)
  /// File exists (`EEXIST`).
  public static let exists = Errno(rawValue: EEXIST)
  /// Cross-device link (`EXDEV`).
  public static let crossDevice = Errno(rawValue: EXDEV)
  /// Not a directory (`ENOTDIR`).
  public static let notDirectory = Errno(rawValue: ENOTDIR)
  /// Is a directory (`EISDIR`).
  public static let isDirectory = Errno(rawValue: EISDIR)
  /// Invalid argument (`EINVAL`).
  public static let invalidArgument = Errno(rawValue: EINVAL)
  /// No space left on device (`ENOSPC`): AppBox's quota refusal.
  public static let noSpace = Errno(rawValue: ENOSPC)
  /// Read-only file system (`EROFS`).
  public static let readOnlyFileSystem = Errno(rawValue: EROFS)
  /// Result too large (`ERANGE`), e.g. an xattr buffer that is too small.
  public static let outOfRange = Errno(rawValue: ERANGE)
  /// Function not implemented (`ENOSYS`): only ever "not implemented".
  public static let notImplemented = Errno(rawValue: ENOSYS)
  /// Directory not empty (`ENOTEMPTY`).
  public static let notEmpty = Errno(rawValue: ENOTEMPTY)
  /// No such attribute (`ENODATA`).
  public static let noData = Errno(rawValue: ENODATA)
  /// Operation not supported (`EOPNOTSUPP`).
  public static let notSupported = Errno(rawValue: EOPNOTSUPP)
  /// Too many levels of symbolic links (`ELOOP`), what `O_NOFOLLOW` reports for a symlink.
  public static let tooManySymlinks = Errno(rawValue: ELOOP)
  /// File name too long (`ENAMETOOLONG`).
  public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
  /// Too many open files in this process (`EMFILE`).
  public static let tooManyOpenFiles = Errno(rawValue: EMFILE)
  /// No such device (`ENODEV`), e.g. a missing `/dev/fuse`.
  public static let noDevice = Errno(rawValue: ENODEV)
}
