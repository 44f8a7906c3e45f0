#if canImport(Glibc)
  import Glibc
#endif

/// A `DIR` stream over a directory descriptor, read entry by entry with stable offsets.
public final class DirectoryStream {
  /// One entry; `name` is valid until the next call on the stream.
  public struct Item {
    /// The NUL-terminated name.
    public let name: UnsafePointer<CChar>
    /// Inode number.
    public let inode: UInt
    /// `DT_*` type.
    public let type: UInt8
    /// The offset that resumes after this entry.
    public let nextOffset: off_t
  }

  private let stream: OpaquePointer

  /// Takes ownership of `fd` (a directory opened for reading).
  public init(fd: Int32) throws(Errno) {
    guard let stream = fdopendir(fd) else {
      let error = Errno.current
      Glibc.close(fd)
      throw error
    }
    self.stream = stream
  }

  deinit { closedir(stream) }

  /// The directory's descriptor.
  public var fd: Int32 { dirfd(stream) }

  /// Moves to an offset an earlier ``Item/nextOffset`` returned (0: the start).
  public func seek(to offset: off_t) { seekdir(stream, offset) }

  /// The next entry, or nil at the end.
  public func next() throws(Errno) -> Item? {
    try SyscallFaults.check(.readdir)
    errno = 0
    guard let entry = readdir(stream) else {
      if errno != 0 { throw Errno.current }
      return nil
    }
    let name = UnsafeRawPointer(entry).advanced(by: MemoryLayout<dirent>.offset(of: \dirent.d_name)!)
      .assumingMemoryBound(to: CChar.self)
    return Item(
      name: name, inode: UInt(entry.pointee.d_ino), type: entry.pointee.d_type, nextOffset: entry.pointee.d_off)
  }
}
