import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// Directories as a backup or a restore makes, opens and removes them: always through a
/// parent's descriptor, never following a symlink, and usable by the user whatever the
/// umask took from a new directory's mode.
enum Directory {
  /// Makes the directory `name` in `at` with `mode` (less the umask, as for any program)
  /// and opens it (see ``open(_:_:)``).
  static func make(_ at: Int32, _ name: UnsafePointer<CChar>, mode: mode_t) throws(Errno) -> Int32 {
    try Sys.mkdirat(at, name, mode)
    return try open(at, name)
  }

  /// Opens the directory `name` in `at` for reading, without following a symlink, and
  /// gives the user back the read, write and search permission a umask may have taken
  /// from it (the work inside needs them; the final mode is set afterwards).
  static func open(_ at: Int32, _ name: UnsafePointer<CChar>) throws(Errno) -> Int32 {
    let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
    let fd: Int32
    do throws(Errno) {
      fd = try Sys.openat(at, name, flags)
    } catch  where error == .accessDenied {
      let path = try Sys.openat(at, name, Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
      defer { Sys.close(path) }
      try Sys.chmod(path, mode_t(try Sys.fstat(path).st_mode & 0o7777) | 0o700)
      fd = try Sys.openat(at, name, flags)
    }
    do throws(Errno) {
      let mode = mode_t(try Sys.fstat(fd).st_mode & 0o7777)
      if mode & 0o700 != 0o700 { try Sys.fchmod(fd, mode | 0o700) }
    } catch {
      Sys.close(fd)
      throw error
    }
    return fd
  }

  /// Opens the directory at the absolute `path` one component at a time from `/`, none
  /// of them followed if it is a symlink (`O_NOFOLLOW` each).
  /// - Throws: `ELOOP` or `ENOTDIR` for a symlink on the way or at the end, `EINVAL` for
  ///   a path that is not absolute or holds `.` or `..`; what `openat` says otherwise.
  static func openWithoutSymlinks(_ path: String) throws(Errno) -> Int32 {
    guard path.hasPrefix("/") else { throw Errno.invalidArgument }
    let components = path.utf8.split(separator: UInt8(ascii: "/")).map { Array($0) }
    guard components.allSatisfy({ $0 != [0x2E] && $0 != [0x2E, 0x2E] }) else { throw Errno.invalidArgument }
    guard !components.isEmpty else {
      // `/` itself: opened for reading.
      return try Sys.openat(AT_FDCWD, "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    }
    return try walk(
      from: try Sys.openat(AT_FDCWD, "/", Linux.openPath | O_DIRECTORY | O_CLOEXEC), components,
      flags: { last in (last ? O_RDONLY : Linux.openPath) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC })
  }

  /// Opens `components` one at a time beneath `start`, which it takes over (closed on
  /// return and on error), each component with `flags(isLast)`; returns the last one's
  /// descriptor (`start` itself for no components).
  static func walk(from start: Int32, _ components: [[UInt8]], flags: (Bool) -> Int32) throws(Errno) -> Int32 {
    var fd = start
    for (index, component) in components.enumerated() {
      let next: Int32
      do throws(Errno) {
        next = try Sys.openat(
          fd, (component + [0]).map { CChar(bitPattern: $0) }, flags(index == components.count - 1))
      } catch {
        Sys.close(fd)
        throw error
      }
      Sys.close(fd)
      fd = next
    }
    return fd
  }

  /// Removes `name` in `directoryFD` and, for a directory, everything below it, without
  /// following symlinks (a directory made unwritable on the way is made writable first),
  /// with a stack of open directories rather than recursion.
  static func removeTree(_ directoryFD: Int32, _ name: [CChar]) throws(Errno) {
    var stack: [(stream: DirectoryStream, parentFD: Int32, name: [CChar])] = []
    var next: (fd: Int32, name: [CChar])? = (directoryFD, name)
    while true {
      if let (fd, name) = next {
        next = nil
        let status = try Sys.fstatat(fd, name, AT_SYMLINK_NOFOLLOW)
        if status.st_mode & S_IFMT == S_IFDIR {
          let stream = try DirectoryStream(
            fd: try Sys.openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
          if status.st_mode & 0o700 != 0o700 { try Sys.fchmod(stream.fd, 0o700) }
          stack.append((stream, fd, name))
        } else {
          try Sys.unlinkat(fd, name, 0)
        }
      }
      guard let top = stack.last else { return }
      guard let item = try top.stream.next() else {
        // Empty now (entries are removed as they are read, so the listing ends).
        stack.removeLast()
        try Sys.unlinkat(top.parentFD, top.name, AT_REMOVEDIR)
        continue
      }
      if !isDotOrDotDot(item.name) {
        next = (top.stream.fd, Array(UnsafeBufferPointer(start: item.name, count: strlen(item.name) + 1)))
      }
    }
  }
}

/// Whether a directory entry's name is `.` or `..`.
func isDotOrDotDot(_ name: UnsafePointer<CChar>) -> Bool {
  name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0))
}
