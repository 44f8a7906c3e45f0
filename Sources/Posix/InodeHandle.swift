import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// A filesystem's own handle for an inode (`struct file_handle`, from
/// `name_to_handle_at(2)`), kept inline in 32 bytes: what it takes to open the inode
/// again once every descriptor on it is closed. Handles longer than ``capacity`` bytes
/// (overlayfs, NFS) are not kept.
public struct InodeHandle: Equatable, Sendable {
  /// The longest handle kept (ext4 uses 8 bytes, XFS 8 or 12, tmpfs 12, btrfs 20).
  public static let capacity = 24
  /// `handle_type`: how the filesystem encoded it.
  public let type: Int32
  /// `handle_bytes`: how many of `words`' bytes are the handle.
  public let length: UInt8
  /// The handle's bytes, zero-padded.
  let words: (UInt64, UInt64, UInt64)

  /// No handle (type and length 0).
  public static let none = InodeHandle(type: 0, length: 0, words: (0, 0, 0))

  public static func == (a: InodeHandle, b: InodeHandle) -> Bool {
    a.type == b.type && a.length == b.length && a.words == b.words
  }

  init(type: Int32, length: UInt8, words: (UInt64, UInt64, UInt64)) {
    self.type = type
    self.length = length
    self.words = words
  }

  /// Calls `body` with a `struct file_handle` holding this handle.
  func withFileHandle<T>(_ body: (UnsafeMutableRawPointer) -> T) -> T {
    withUnsafeTemporaryAllocation(byteCount: 8 + Self.capacity, alignment: 8) { buffer in
      let base = buffer.baseAddress!
      base.storeBytes(of: UInt32(length), as: UInt32.self)
      base.storeBytes(of: type, toByteOffset: 4, as: Int32.self)
      base.storeBytes(of: words, toByteOffset: 8, as: (UInt64, UInt64, UInt64).self)
      return body(base)
    }
  }
}

extension Sys {
  /// `name_to_handle_at(fd, "", …, AT_EMPTY_PATH)`: the handle of the inode `fd` refers
  /// to (an `O_PATH` descriptor will do; no privilege needed).
  /// - Throws: `EOVERFLOW` when the filesystem's handle is longer than
  ///   ``InodeHandle/capacity``; `EOPNOTSUPP` when it has none.
  public static func inodeHandle(_ fd: Int32) throws(Errno) -> InodeHandle {
    try withUnsafeTemporaryAllocation(byteCount: 8 + InodeHandle.capacity, alignment: 8) {
      (buffer) throws(Errno) -> InodeHandle in
      let base = buffer.baseAddress!
      base.initializeMemory(as: UInt8.self, repeating: 0, count: buffer.count)
      base.storeBytes(of: UInt32(InodeHandle.capacity), as: UInt32.self)
      var mountID: Int32 = 0
      try check(cposix_name_to_handle_at(fd, "", base, &mountID, Linux.atEmptyPath))
      return InodeHandle(
        type: base.load(fromByteOffset: 4, as: Int32.self), length: UInt8(base.load(as: UInt32.self)),
        words: base.load(fromByteOffset: 8, as: (UInt64, UInt64, UInt64).self))
    }
  }

  /// `open_by_handle_at(2)`: opens `handle` on the filesystem `mountFD` is on. Needs
  /// CAP_DAC_READ_SEARCH (EPERM without); a deleted inode is ESTALE.
  public static func open(_ handle: InodeHandle, mountFD: Int32, flags: Int32) throws(Errno) -> Int32 {
    try retryingEINTR { handle.withFileHandle { cposix_open_by_handle_at(mountFD, $0, flags) } }
  }
}
