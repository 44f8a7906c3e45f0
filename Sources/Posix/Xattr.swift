import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// Extended-attribute calls on an inode descriptor.
///
/// `O_PATH` descriptors do not support `f*xattr`, so these go through `/proc/self/fd/N`
/// (the magic link resolves to the inode itself, never through a path in the tree).
public enum Xattr {
  /// `getxattr(2)`: the value, or its size when `buffer` is empty.
  public static func get(_ fd: Int32, _ name: UnsafePointer<CChar>, into buffer: UnsafeMutableRawBufferPointer)
    throws(Errno) -> Int
  {
    try SyscallFaults.check(.getxattr, name: name)
    var path = ProcPath(fd)
    return try path.withCString { (p) throws(Errno) -> Int in
      try retryingEINTR { cposix_getxattr(p, name, buffer.baseAddress, buffer.count) }
    }
  }

  /// Reads a whole value into an array (small attributes; not for the request path's
  /// size probe, which uses `get`).
  public static func value(_ fd: Int32, _ name: UnsafePointer<CChar>) throws(Errno) -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: 256)
    while true {
      let result = buffer.withUnsafeMutableBytes { raw -> Result<Int, Errno> in
        do throws(Errno) { return .success(try get(fd, name, into: raw)) } catch { return .failure(error) }
      }
      switch result {
      case .success(let count):
        buffer.removeSubrange(count...)
        return buffer
      case .failure(let error) where error == .outOfRange:
        let size = try get(fd, name, into: UnsafeMutableRawBufferPointer(start: nil, count: 0))
        buffer = [UInt8](repeating: 0, count: max(size, buffer.count * 2))
      case .failure(let error):
        throw error
      }
    }
  }

  /// The value of `name` on the entry `entry` of the directory `directoryFD` (through
  /// `/proc/self/fd`, without opening the entry), or nil when it has none.
  public static func value(in directoryFD: Int32, entry: UnsafePointer<CChar>, _ name: UnsafePointer<CChar>) -> [UInt8]?
  {
    var path = Array("/proc/self/fd/\(directoryFD)/".utf8CString.dropLast())
    var index = 0
    while entry[index] != 0 {
      path.append(entry[index])
      index += 1
    }
    path.append(0)
    var buffer = [UInt8](repeating: 0, count: 64)
    let count = buffer.withUnsafeMutableBytes { raw in cposix_getxattr(path, name, raw.baseAddress, raw.count) }
    guard count >= 0 else { return nil }
    return Array(buffer[..<count])
  }

  /// Sets `name` to `value` (convenience for attributes named in Swift).
  public static func set(_ fd: Int32, name: String, value: [UInt8], flags: Int32 = 0) throws(Errno) {
    let result = name.withCString { cname in
      value.withUnsafeBytes { bytes -> Result<Void, Errno> in
        do throws(Errno) { return .success(try set(fd, cname, bytes, flags: flags)) } catch { return .failure(error) }
      }
    }
    try result.get()
  }

  /// The value of `name` (convenience for attributes named in Swift).
  public static func value(_ fd: Int32, name: String) throws(Errno) -> [UInt8] {
    let result = name.withCString { cname -> Result<[UInt8], Errno> in
      do throws(Errno) { return .success(try value(fd, cname)) } catch { return .failure(error) }
    }
    return try result.get()
  }

  /// Removes `name` (convenience for attributes named in Swift).
  public static func remove(_ fd: Int32, name: String) throws(Errno) {
    let result = name.withCString { cname -> Result<Void, Errno> in
      do throws(Errno) { return .success(try remove(fd, cname)) } catch { return .failure(error) }
    }
    try result.get()
  }

  /// Sets `name` through a descriptor open for I/O (`fsetxattr`: no path resolution).
  public static func set(openFile fd: Int32, name: String, value: [UInt8]) throws(Errno) {
    try SyscallFaults.check(.setxattr)
    guard cposix_fsetxattr(fd, name, value, value.count, 0) == 0 else { throw Errno.current }
  }

  /// Sets `name` on the file at `path` (following symlinks), for tools outside the daemon.
  public static func set(path: String, name: String, value: [UInt8]) throws(Errno) {
    guard cposix_setxattr(path, name, value, value.count, 0) == 0 else { throw Errno.current }
  }

  /// `setxattr(2)`.
  public static func set(_ fd: Int32, _ name: UnsafePointer<CChar>, _ value: UnsafeRawBufferPointer, flags: Int32)
    throws(Errno)
  {
    try SyscallFaults.check(.setxattr)
    var path = ProcPath(fd)
    try path.withCString { (p) throws(Errno) in
      try check(cposix_setxattr(p, name, value.baseAddress, value.count, flags))
    }
  }

  /// `listxattr(2)`: NUL-separated names, or the size when `buffer` is empty.
  public static func list(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
    var path = ProcPath(fd)
    return try path.withCString { (p) throws(Errno) -> Int in
      try retryingEINTR { cposix_listxattr(p, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), buffer.count) }
    }
  }

  /// All attribute names of an inode, as raw bytes.
  public static func names(_ fd: Int32) throws(Errno) -> [[UInt8]] {
    var size = try list(fd, into: UnsafeMutableRawBufferPointer(start: nil, count: 0))
    while true {
      var buffer = [UInt8](repeating: 0, count: max(size, 1))
      let result = buffer.withUnsafeMutableBytes { raw -> Result<Int, Errno> in
        do throws(Errno) { return .success(try list(fd, into: raw)) } catch { return .failure(error) }
      }
      switch result {
      case .success(let count):
        return buffer[..<count].split(separator: 0, omittingEmptySubsequences: true).map(Array.init)
      case .failure(let error) where error == .outOfRange:
        size = try list(fd, into: UnsafeMutableRawBufferPointer(start: nil, count: 0))
      case .failure(let error):
        throw error
      }
    }
  }

  /// `removexattr(2)`.
  public static func remove(_ fd: Int32, _ name: UnsafePointer<CChar>) throws(Errno) {
    try SyscallFaults.check(.removexattr)
    var path = ProcPath(fd)
    try path.withCString { (p) throws(Errno) in try check(cposix_removexattr(p, name)) }
  }
}
