import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// The directories a depth-first walk is inside, innermost last, with at most
/// ``openLimit`` of them open at once. A program can make a tree deeper than the daemon's
/// descriptor limit through the mount (a chain of directories renamed into the deepest of
/// another), and a walk that held one descriptor per level could not go through it: the
/// mount-time index would fail and the sandbox could not be mounted again
/// (docs/architecture.md, "Walks of the backing tree"). A level further out than the limit
/// is closed where it stands (its stream's offset kept); when the walk comes back to it,
/// it is opened again through `..` of the level it was left for and must be the same
/// directory (device and inode), else ``Errno/stale``.
struct DirectoryLevels<Payload> {
  /// One directory being listed.
  struct Level {
    /// Its stream; nil while it is closed.
    fileprivate(set) var stream: DirectoryStream?
    /// Where its listing resumes: the offset after the entry last read.
    fileprivate var resume: off_t = 0
    /// The directory's identity, checked when it is opened again.
    let device: UInt64
    let inode: UInt64
    /// What the walk keeps with it.
    let payload: Payload
  }

  private(set) var levels: [Level] = []
  /// The most levels open at once (at least 1).
  let openLimit: Int
  /// Flags for opening a closed level again (`O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC` added).
  let reopenFlags: Int32
  /// The outermost open level: every level from it inward is open, every one further out closed.
  private var firstOpen = 0

  /// Levels of a walk that keeps at most `openLimit` directories open, opening closed ones
  /// again with `reopenFlags` (`O_RDONLY`, and `O_NOATIME` where wished).
  init(openLimit: Int = 64, reopenFlags: Int32 = O_RDONLY) {
    self.openLimit = max(1, openLimit)
    self.reopenFlags = reopenFlags
  }

  /// The innermost level (open), nil once the walk is done.
  var innermost: Level? { levels.last }

  /// The innermost level's descriptor. Only while ``innermost`` is not nil.
  var fd: Int32 { levels[levels.count - 1].stream!.fd }

  /// Enters a directory: takes `fd` (a directory opened for reading; closed on an error)
  /// and closes the outermost open level if more than ``openLimit`` would be open.
  mutating func enter(_ fd: Int32, payload: Payload) throws(Errno) {
    let stream = try DirectoryStream(fd: fd)
    let st = try Sys.fstat(stream.fd)
    levels.append(Level(stream: stream, device: UInt64(st.st_dev), inode: UInt64(st.st_ino), payload: payload))
    if levels.count - firstOpen > openLimit {
      levels[firstOpen].stream = nil
      firstOpen += 1
    }
  }

  /// The innermost level's next entry (its name valid until the next call), or nil at its end.
  mutating func next() throws(Errno) -> DirectoryStream.Item? {
    let index = levels.count - 1
    guard let item = try levels[index].stream!.next() else { return nil }
    levels[index].resume = item.nextOffset
    return item
  }

  /// Leaves the innermost level, opening the one around it again if it was closed.
  /// - Returns: the level left, its stream still open (closed when the caller drops it).
  /// - Throws: the error opening the outer level again, ``Errno/stale`` if `..` is not
  ///   that directory any more (the level left is closed then).
  @discardableResult
  mutating func leave() throws(Errno) -> Level {
    let left = levels.removeLast()
    guard let outer = levels.indices.last, levels[outer].stream == nil, let inner = left.stream else { return left }
    let fd = try Sys.openat(inner.fd, "..", reopenFlags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    let stream = try DirectoryStream(fd: fd)
    let st = try Sys.fstat(stream.fd)
    guard UInt64(st.st_dev) == levels[outer].device, UInt64(st.st_ino) == levels[outer].inode else {
      throw .stale
    }
    stream.seek(to: levels[outer].resume)
    levels[outer].stream = stream
    firstOpen = outer
    return left
  }
}
