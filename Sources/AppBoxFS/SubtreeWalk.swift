import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// A depth-first walk of the tree below an open directory: every entry, parents before
/// their children, following no symlink. Entries that vanish meanwhile are skipped.
enum SubtreeWalk {
  /// One entry, valid during the visit.
  struct Entry {
    /// A descriptor of the directory the entry is in (open for reading).
    let directoryFD: Int32
    /// That directory's backing inode number.
    let directoryInode: UInt64
    /// The entry's NUL-terminated name.
    let name: UnsafePointer<CChar>
    /// The entry's attributes (`lstat`).
    let st: stat

    var isDirectory: Bool { st.st_mode & S_IFMT == S_IFDIR }
  }

  /// Walks the tree below `fd` (any descriptor of a directory; left open), calling `visit`
  /// for each entry; directories are visited before they are listed.
  /// - Throws: the first error listing or opening a directory (a directory that cannot be
  ///   read leaves its subtree unknown), or what `visit` throws.
  static func run(below fd: Int32, _ visit: (Entry) throws(Errno) -> Void) throws(Errno) {
    // Not one descriptor per level: a tree deeper than the descriptor limit is walked too.
    var stack = DirectoryLevels<Void>()
    try stack.enter(try Sys.reopen(fd, flags: O_RDONLY | O_DIRECTORY | O_CLOEXEC), payload: ())
    while let level = stack.innermost {
      guard let item = try stack.next() else {
        try stack.leave()
        continue
      }
      if isDotOrDotDot(item.name) { continue }
      let directoryFD = stack.fd
      let st: stat
      do throws(Errno) {
        st = try Sys.fstatat(directoryFD, item.name, AT_SYMLINK_NOFOLLOW)
      } catch  where error == .noEntry {
        continue
      }
      let entry = Entry(directoryFD: directoryFD, directoryInode: level.inode, name: item.name, st: st)
      try visit(entry)
      guard entry.isDirectory else { continue }
      let child: Int32
      do throws(Errno) {
        child = try Sys.openat(
          directoryFD, item.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
      } catch  where error == .noEntry || error == .notDirectory {
        continue
      }
      try stack.enter(child, payload: ())
    }
  }
}
