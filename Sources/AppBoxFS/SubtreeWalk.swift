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
    let top = try DirectoryStream(
      fd: try Sys.reopen(fd, flags: O_RDONLY | O_DIRECTORY | O_CLOEXEC))
    var stack = [(stream: top, inode: UInt64(try Sys.fstat(top.fd).st_ino))]
    while let (stream, inode) = stack.last {
      guard let item = try stream.next() else {
        stack.removeLast()
        continue
      }
      if isDotOrDotDot(item.name) { continue }
      let st: stat
      do throws(Errno) {
        st = try Sys.fstatat(stream.fd, item.name, AT_SYMLINK_NOFOLLOW)
      } catch  where error == .noEntry {
        continue
      }
      let entry = Entry(directoryFD: stream.fd, directoryInode: inode, name: item.name, st: st)
      try visit(entry)
      guard entry.isDirectory else { continue }
      let child: Int32
      do throws(Errno) {
        child = try Sys.openat(
          stream.fd, item.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
      } catch  where error == .noEntry || error == .notDirectory {
        continue
      }
      stack.append((try DirectoryStream(fd: child), UInt64(st.st_ino)))
    }
  }
}
