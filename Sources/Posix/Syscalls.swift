import CPosixShim
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

// One thin wrapper per system call: the only place in AppBox's request path that calls C.
// Names are passed as NUL-terminated C strings exactly as FUSE hands them over (bytes,
// never re-encoded). EINTR is retried where the call is restartable, never on close.

/// Runs `body` until it stops failing with EINTR; returns its non-negative result.
@inlinable
func retryingEINTR<T: BinaryInteger>(_ body: () -> T) throws(Errno) -> T {
  while true {
    let result = body()
    if result >= 0 { return result }
    let error = Errno.current
    if error != .interrupted { throw error }
  }
}

/// Checks a call that returns 0 or -1.
@inlinable
func check(_ result: Int32) throws(Errno) {
  if result != 0 { throw Errno.current }
}

/// Calls on a descriptor with an empty path that this kernel takes (each turned off by
/// its first refusal as unknown: then the `/proc/self/fd` path instead).
public enum EmptyPathCalls {
  /// `fchmodat2(fd, "", mode, AT_EMPTY_PATH)`, Linux 6.6+.
  public static let fchmodat2 = Atomic<Bool>(true)
  /// `utimensat(fd, "", times, AT_EMPTY_PATH)` on a file.
  public static let utimensat = Atomic<Bool>(true)
}

/// The raw system calls, namespaced.
public enum Sys {
  /// Turns a C call's 0-or-minus-one result into a thrown ``Errno``.
  @inlinable
  public static func check(_ result: Int32) throws(Errno) {
    if result != 0 { throw Errno.current }
  }

  /// `openat(2)`. `Linux.openNoAccessTime` in `flags` is a wish, as for ``reopen(_:flags:)``.
  @inlinable
  public static func openat(
    _ dir: Int32, _ name: UnsafePointer<CChar>, _ flags: Int32, _ mode: mode_t = 0
  ) throws(Errno) -> Int32 {
    try SyscallFaults.check(.openat, name: name)
    do throws(Errno) {
      return try retryingEINTR { cposix_openat(dir, name, flags, mode) }
    } catch  where error == .notPermitted && flags & Linux.openNoAccessTime != 0 {
      return try retryingEINTR { cposix_openat(dir, name, flags & ~Linux.openNoAccessTime, mode) }
    }
  }

  /// Opens `fd` again through `/proc/self/fd`, with new flags: how an `O_PATH` inode
  /// descriptor becomes a readable or writable one without resolving any path.
  /// `Linux.openNoAccessTime` in `flags` is a wish: where the kernel refuses it (EPERM:
  /// the caller neither owns the file nor has CAP_FOWNER), the file opens without it.
  @inlinable
  public static func reopen(_ fd: Int32, flags: Int32) throws(Errno) -> Int32 {
    var path = ProcPath(fd)
    return try path.withCString { (p) throws(Errno) -> Int32 in
      try openat(AT_FDCWD, p, flags & ~(O_NOFOLLOW | O_CREAT | O_EXCL))
    }
  }

  /// `close(2)`; never retried (Linux closes the descriptor even on EINTR).
  @inlinable
  public static func close(_ fd: Int32) {
    _ = Glibc.close(fd)
  }

  /// `fstatat(2)`.
  @inlinable
  public static func fstatat(_ dir: Int32, _ name: UnsafePointer<CChar>, _ flags: Int32) throws(Errno) -> stat {
    try SyscallFaults.check(.fstatat, name: name)
    var st = stat()
    try check(Glibc.fstatat(dir, name, &st, flags))
    return st
  }

  /// The type of the filesystem `fd` is on (`fstatfs(2)`'s `f_type`, e.g.
  /// ``Linux/ext4SuperMagic``); any descriptor, `O_PATH` ones included.
  public static func filesystemType(_ fd: Int32) throws(Errno) -> Int {
    try SyscallFaults.check(.fstatfs)
    var type = 0
    try check(cposix_fstatfs_type(fd, &type))
    return type
  }

  /// `fstat` of any descriptor, `O_PATH` ones included (`fstatat` with `AT_EMPTY_PATH`).
  @inlinable
  public static func fstat(_ fd: Int32) throws(Errno) -> stat {
    try SyscallFaults.check(.fstat)
    var st = stat()
    try check(Glibc.fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
    return st
  }

  /// `mkdirat(2)`.
  @inlinable
  public static func mkdirat(_ dir: Int32, _ name: UnsafePointer<CChar>, _ mode: mode_t) throws(Errno) {
    try SyscallFaults.check(.mkdirat, name: name)
    try check(Glibc.mkdirat(dir, name, mode))
  }

  /// `mknodat(2)`.
  @inlinable
  public static func mknodat(_ dir: Int32, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ dev: dev_t) throws(Errno) {
    try SyscallFaults.check(.mknodat, name: name)
    try check(Glibc.mknodat(dir, name, mode, dev))
  }

  /// `symlinkat(2)`.
  @inlinable
  public static func symlinkat(_ target: UnsafePointer<CChar>, _ dir: Int32, _ name: UnsafePointer<CChar>) throws(Errno)
  {
    try SyscallFaults.check(.symlinkat, name: name)
    try check(Glibc.symlinkat(target, dir, name))
  }

  /// `readlinkat(2)`: of an `O_PATH` descriptor on the symlink itself (`path` empty), or of
  /// `path` relative to `fd`.
  public static func readlink(_ fd: Int32, at path: String = "") throws(Errno) -> [UInt8] {
    let capacity = Int(PATH_MAX) + 1
    let raw = UnsafeMutablePointer<CChar>.allocate(capacity: capacity)
    defer { raw.deallocate() }
    let count = try retryingEINTR { Glibc.readlinkat(fd, path, raw, capacity) }
    if count >= capacity { throw Errno.nameTooLong }
    return UnsafeRawBufferPointer(start: raw, count: count).map { $0 }
  }

  /// `unlinkat(2)`.
  @inlinable
  public static func unlinkat(_ dir: Int32, _ name: UnsafePointer<CChar>, _ flags: Int32) throws(Errno) {
    try SyscallFaults.check(.unlinkat, name: name)
    try check(Glibc.unlinkat(dir, name, flags))
  }

  /// `renameat2(2)`.
  @inlinable
  public static func renameat2(
    _ oldDir: Int32, _ oldName: UnsafePointer<CChar>, _ newDir: Int32, _ newName: UnsafePointer<CChar>, _ flags: UInt32
  ) throws(Errno) {
    try SyscallFaults.check(.renameat2, name: oldName)
    try check(cposix_renameat2(oldDir, oldName, newDir, newName, flags))
  }

  /// `linkat(2)` of an `O_PATH` descriptor (`AT_EMPTY_PATH`, which needs
  /// CAP_DAC_READ_SEARCH) or, failing that, through `/proc/self/fd` (`AT_SYMLINK_FOLLOW`).
  @inlinable
  public static func link(_ fd: Int32, _ newDir: Int32, _ newName: UnsafePointer<CChar>) throws(Errno) {
    try SyscallFaults.check(.linkat, name: newName)
    if Glibc.linkat(fd, "", newDir, newName, AT_EMPTY_PATH) == 0 { return }
    let first = Errno.current
    guard first == .noEntry || first == .notPermitted else { throw first }
    var path = ProcPath(fd)
    try path.withCString { (p) throws(Errno) in
      try check(Glibc.linkat(AT_FDCWD, p, newDir, newName, AT_SYMLINK_FOLLOW))
    }
  }

  /// A mode change through any descriptor, an `O_PATH` one included: `fchmodat2` with
  /// `AT_EMPTY_PATH` (Linux 6.6+; a third of the time of a path through `/proc`, which
  /// the kernel resolves anew each time), else `chmod` through `/proc/self/fd`.
  @inlinable
  public static func chmod(_ fd: Int32, _ mode: mode_t) throws(Errno) {
    if EmptyPathCalls.fchmodat2.load(ordering: .relaxed) {
      if cposix_fchmod_empty_path(fd, mode) == 0 { return }
      let error = Errno.current
      guard error == .notImplemented else { throw error }
      EmptyPathCalls.fchmodat2.store(false, ordering: .relaxed)  // an older kernel: the path from now on
    }
    var path = ProcPath(fd)
    try path.withCString { (p) throws(Errno) in try check(Glibc.chmod(p, mode)) }
  }

  /// `fchmod(2)` on an open descriptor.
  @inlinable
  public static func fchmod(_ fd: Int32, _ mode: mode_t) throws(Errno) {
    try check(Glibc.fchmod(fd, mode))
  }

  /// `faccessat` of an `O_PATH` descriptor with `AT_EACCESS`: checked against the thread's
  /// filesystem credentials.
  @inlinable
  public static func access(_ fd: Int32, _ mask: Int32) throws(Errno) {
    var path = ProcPath(fd)
    try path.withCString { (p) throws(Errno) in try check(Glibc.faccessat(AT_FDCWD, p, mask, AT_EACCESS)) }
  }

  /// `fchownat` with `AT_EMPTY_PATH` (works for `O_PATH` descriptors and symlinks).
  @inlinable
  public static func chown(_ fd: Int32, _ uid: uid_t, _ gid: gid_t) throws(Errno) {
    try check(Glibc.fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
  }

  /// `utimensat` on an `O_PATH` descriptor: `utimensat(fd, "", AT_EMPTY_PATH)` (a symlink
  /// keeps its own times), else, where the kernel refuses that for a file, through
  /// `/proc/self/fd`.
  @inlinable
  public static func utimens(_ fd: Int32, isSymlink: Bool, _ times: (timespec, timespec)) throws(Errno) {
    var t = times
    try withUnsafePointer(to: &t) { (tp) throws(Errno) in
      try tp.withMemoryRebound(to: timespec.self, capacity: 2) { (ts) throws(Errno) in
        if isSymlink {
          try check(Glibc.utimensat(fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
        } else if EmptyPathCalls.utimensat.load(ordering: .relaxed) {
          if Glibc.utimensat(fd, "", ts, AT_EMPTY_PATH) == 0 { return }
          let error = Errno.current
          guard error == .invalidArgument || error == .noEntry else { throw error }
          var path = ProcPath(fd)
          try path.withCString { (p) throws(Errno) in try check(Glibc.utimensat(AT_FDCWD, p, ts, 0)) }
          // The path took what the empty path did not: an older kernel, the path from now on.
          EmptyPathCalls.utimensat.store(false, ordering: .relaxed)
        } else {
          var path = ProcPath(fd)
          try path.withCString { (p) throws(Errno) in try check(Glibc.utimensat(AT_FDCWD, p, ts, 0)) }
        }
      }
    }
  }

  /// `futimens(3)` on an open descriptor.
  @inlinable
  public static func futimens(_ fd: Int32, _ times: (timespec, timespec)) throws(Errno) {
    var t = times
    try withUnsafePointer(to: &t) { (tp) throws(Errno) in
      try tp.withMemoryRebound(to: timespec.self, capacity: 2) { (ts) throws(Errno) in
        try check(Glibc.futimens(fd, ts))
      }
    }
  }

  /// `ftruncate(2)`.
  @inlinable
  public static func ftruncate(_ fd: Int32, _ size: off_t) throws(Errno) {
    try SyscallFaults.check(.ftruncate)
    _ = try retryingEINTR { Glibc.ftruncate(fd, size) }
  }

  /// `pread(2)` into a buffer.
  @inlinable
  public static func pread(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, _ offset: off_t) throws(Errno) -> Int {
    try retryingEINTR { Glibc.pread(fd, buffer.baseAddress, buffer.count, offset) }
  }

  /// `pwrite(2)` of a buffer.
  @inlinable
  public static func pwrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, _ offset: off_t) throws(Errno) -> Int {
    try retryingEINTR { Glibc.pwrite(fd, buffer.baseAddress, buffer.count, offset) }
  }

  /// `write(2)` of a whole buffer (one call for pipes and `O_APPEND` files up to PIPE_BUF).
  @inlinable
  public static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(Errno) -> Int {
    try retryingEINTR { Glibc.write(fd, buffer.baseAddress, buffer.count) }
  }

  /// `fsync(2)` or `fdatasync(2)`.
  @inlinable
  public static func fsync(_ fd: Int32, dataOnly: Bool) throws(Errno) {
    _ = try retryingEINTR { dataOnly ? Glibc.fdatasync(fd) : Glibc.fsync(fd) }
  }

  /// `sync_file_range(2)` of the whole file, waiting before and after the write: every
  /// dirty page is written back and its I/O done when this returns (not an `fdatasync`:
  /// no journal commit, no cache flush). So is what the backing filesystem allocates or
  /// frees for them then (ext4: a fragmented file's extent-tree blocks, allocated with a
  /// delayed allocation's blocks, freed when unwritten extents converted at the I/O's end
  /// merge back into the inode).
  @inlinable
  public static func writeBack(_ fd: Int32) throws(Errno) {
    try SyscallFaults.check(.syncFileRange)
    _ = try retryingEINTR { cposix_write_back(fd) }
  }

  /// `fallocate(2)`.
  @inlinable
  public static func fallocate(_ fd: Int32, _ mode: Int32, _ offset: off_t, _ length: off_t) throws(Errno) {
    try SyscallFaults.check(.fallocate)
    _ = try retryingEINTR { cposix_fallocate(fd, mode, offset, length) }
  }

  /// `lseek(2)`.
  @inlinable
  public static func lseek(_ fd: Int32, _ offset: off_t, _ whence: Int32) throws(Errno) -> off_t {
    let result = Glibc.lseek(fd, offset, whence)
    if result < 0 { throw Errno.current }
    return result
  }

  /// `copy_file_range(2)`.
  @inlinable
  public static func copyFileRange(
    _ inFD: Int32, _ inOffset: off_t, _ outFD: Int32, _ outOffset: off_t, _ length: Int, _ flags: UInt32
  ) throws(Errno) -> Int {
    try SyscallFaults.check(.copyFileRange)
    var i = inOffset
    var o = outOffset
    return try retryingEINTR { cposix_copy_file_range(inFD, &i, outFD, &o, length, flags) }
  }

  /// `fstatvfs(3)`.
  @inlinable
  public static func fstatvfs(_ fd: Int32) throws(Errno) -> statvfs {
    var st = statvfs()
    _ = try retryingEINTR { Glibc.fstatvfs(fd, &st) }
    return st
  }

  /// `dup(2)` with close-on-exec.
  @inlinable
  public static func dup(_ fd: Int32) throws(Errno) -> Int32 {
    try retryingEINTR { cposix_fcntl_int(fd, F_DUPFD_CLOEXEC, 0) }
  }
}

/// `/proc/self/fd/N` as a NUL-terminated byte buffer on the stack-friendly path.
public struct ProcPath {
  @usableFromInline var bytes: [CChar]

  /// The `/proc/self/fd` path of `fd`.
  @inlinable
  public init(_ fd: Int32) {
    bytes = Array("/proc/self/fd/\(fd)".utf8CString)
  }

  /// Calls `body` with the path as a C string.
  @inlinable
  public mutating func withCString<R, E: Error>(_ body: (UnsafePointer<CChar>) throws(E) -> R) throws(E) -> R {
    try bytes.withUnsafeBufferPointer { (b) throws(E) -> R in try body(b.baseAddress!) }
  }
}

extension Sys {
  /// The path the kernel shows for a descriptor (`/proc/self/fd/N`'s link), as bytes.
  public static func path(of fd: Int32) throws(Errno) -> [UInt8] {
    var path = ProcPath(fd)
    let capacity = Int(PATH_MAX) + 1
    let raw = UnsafeMutablePointer<CChar>.allocate(capacity: capacity)
    defer { raw.deallocate() }
    let count = try path.withCString { (p) throws(Errno) -> Int in
      try retryingEINTR { Glibc.readlink(p, raw, capacity) }
    }
    return UnsafeRawBufferPointer(start: raw, count: min(count, capacity)).map { $0 }
  }
}
