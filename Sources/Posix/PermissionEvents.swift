import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// fanotify(7) read permission events: a group that the kernel asks before each read of
/// a refused file, and that answers allow or deny (the read fails with EPERM). Needs
/// CAP_SYS_ADMIN.
///
/// Since Linux 6.14 the kernel decides when a file is opened whether its reads may ever
/// raise permission events: only when a mark asked for them on the inode then. So a file
/// that may have to be refused later is armed (``arm(_:)``) before it is opened: marked,
/// with the same event in the mark's ignore mask, so that its reads raise nothing outside
/// the kernel. ``refuse(_:)`` empties the ignore mask: from then on every read asks.
public final class PermissionEvents: Sendable {
  /// The group's descriptor.
  private let group: Int32

  /// - Throws: EPERM without CAP_SYS_ADMIN; EINVAL or ENOSYS without permission events.
  public init() throws(Errno) {
    group = cposix_fanotify_group()
    guard group >= 0 else { throw Errno.current }
  }

  deinit { Glibc.close(group) }

  /// Arms the inode that descriptor `fd` refers to (any descriptor, `O_PATH` too): files
  /// opened on it from now on can be refused.
  public func arm(_ fd: Int32) throws(Errno) {
    try change(fd, add: true, ignore: false)
    do { try change(fd, add: true, ignore: true) } catch {
      // Best effort: the error thrown is the arm's. A mark left without its ignore mask
      // only makes the inode's reads ask ``answer(_:)``, which allows an unrefused file.
      try? change(fd, add: false, ignore: false)
      throw error
    }
  }

  /// From now on, every read of the armed inode asks ``answer(_:)``. An inode whose mark
  /// the kernel dropped (with its last link: ENOENT) is marked again, without the ignore
  /// mask: a file opened while it was armed still raises its reads' events.
  public func refuse(_ fd: Int32) throws(Errno) {
    do throws(Errno) { try change(fd, add: false, ignore: true) } catch  where error == .noEntry {
      try change(fd, add: true, ignore: false)
    }
  }

  /// Undoes ``refuse(_:)``.
  public func allow(_ fd: Int32) throws(Errno) { try change(fd, add: true, ignore: true) }

  /// Takes the inode's mark off (both of its masks, each tried). A mark that is gone
  /// already is no failure: the kernel drops an inode's marks with its last link (ENOENT).
  /// - Throws: the first other failure.
  public func disarm(_ fd: Int32) throws(Errno) {
    var failure: Errno?
    for ignore in [true, false] {
      do throws(Errno) { try change(fd, add: false, ignore: ignore) } catch {
        if error != .noEntry { failure = failure ?? error }
      }
    }
    if let failure { throw failure }
  }

  private func change(_ fd: Int32, add: Bool, ignore: Bool) throws(Errno) {
    var path = ProcPath(fd)
    try path.withCString { (p) throws(Errno) in
      try Sys.check(cposix_fanotify_mark(group, add ? 1 : 0, ignore ? 1 : 0, p))
    }
  }

  /// Answers events until the process ends: `deny` decides, from the accessed file's
  /// device and inode numbers, whether the read fails (EPERM). Only a broken group (a
  /// read that fails but for EINTR, EAGAIN or ENOMEM) ends the loop.
  public func answer(_ deny: (_ device: UInt64, _ inode: UInt64) -> Bool) {
    var fds = [Int32](repeating: -1, count: 64)
    while true {
      let count = fds.withUnsafeMutableBufferPointer { cposix_fanotify_read(group, $0.baseAddress, Int32($0.count)) }
      if count < 0 {
        if errno == EINTR || errno == EAGAIN || errno == ENOMEM { continue }
        return
      }
      for fd in fds[..<Int(count)] {
        var st = stat()
        let refused = fstat(fd, &st) == 0 && deny(UInt64(st.st_dev), UInt64(st.st_ino))
        _ = cposix_fanotify_respond(group, fd, refused ? 0 : 1)
        Glibc.close(fd)
      }
    }
  }
}
