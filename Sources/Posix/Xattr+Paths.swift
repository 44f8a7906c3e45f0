import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - By path (client code: AppBoxKit, the CLI)

extension Xattr {
  /// The value of `name` on the file at `path` (following symlinks).
  /// - Throws: ENODATA when it has none, or the call's error.
  public static func value(path: String, name: String) throws(Errno) -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: 128)
    while true {
      let count = buffer.withUnsafeMutableBytes { cposix_getxattr(path, name, $0.baseAddress, $0.count) }
      if count >= 0 { return Array(buffer[..<count]) }
      let error = Errno.current
      if error == .interrupted { continue }
      guard error == .outOfRange else { throw error }
      let size = cposix_getxattr(path, name, nil, 0)
      guard size >= 0 else { throw Errno.current }
      buffer = [UInt8](repeating: 0, count: max(size, buffer.count * 2))
    }
  }

  /// Removes `name` from the file at `path` (following symlinks).
  /// - Throws: ENODATA when it has none, or the call's error.
  public static func remove(path: String, name: String) throws(Errno) {
    guard cposix_removexattr(path, name) == 0 else { throw Errno.current }
  }
}
