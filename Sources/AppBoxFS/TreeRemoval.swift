import FilesystemInterface
import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// Removes a directory and everything below it, deepest first, following no symlink
/// (`rm -rf` by descriptors): a container that is uninstalled, or the leftovers of an
/// install or removal that a crash interrupted.
enum TreeRemoval {
  /// One directory being emptied.
  private struct Level {
    /// Its name in the directory around it (or in `directoryFD`).
    let name: [UInt8]
    /// The first components of its path below the removed directory (at most ``pathPrefix``).
    let components: [[UInt8]]
  }

  /// How many leading components of an entry's path `removed` hears: enough to tell its
  /// domain and container, and bounded, so that a deep tree costs memory in proportion
  /// to its entries, not to their depth squared.
  static let pathPrefix = 4

  /// Removes `name` in `directoryFD` and its subtree, holding at most a few directories
  /// open however deep it goes (``DirectoryLevels``). `removed` hears each entry once it is
  /// gone: its attributes (taken just before) and the first ``pathPrefix`` components of
  /// its path below the removed directory (empty for the directory itself, last). Entries
  /// that vanish meanwhile are skipped; a directory that a program fills meanwhile
  /// (ENOTEMPTY) is left, with what is in it.
  /// - Returns: how many directories were left that way.
  /// - Throws: the first other error (then the rest is left as it is).
  @discardableResult
  static func remove(
    _ name: [UInt8], in directoryFD: Int32, removed: ([[UInt8]], stat) -> Void = { _, _ in }
  ) throws(Errno) -> Int {
    let top = try FileName.withBytes(name) { (cname) throws(Errno) -> Int32 in
      try Sys.openat(directoryFD, cname.cString, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    }
    var stack = DirectoryLevels<Level>()
    try stack.enter(top, payload: Level(name: name, components: []))
    var left = 0
    while let level = stack.innermost?.payload {
      guard let item = try stack.next() else {
        let leftLevel = try stack.leave()
        let st = try Sys.fstat(leftLevel.stream!.fd)
        let parentFD = stack.innermost == nil ? directoryFD : stack.fd
        do throws(Errno) {
          try FileName.withBytes(level.name) { (cname) throws(Errno) in
            try Sys.unlinkat(parentFD, cname.cString, AT_REMOVEDIR)
          }
          removed(level.components, st)
        } catch  where error == .notEmpty {
          left += 1
        } catch  where error == .noEntry {
          continue
        }
        continue
      }
      if isDotOrDotDot(item.name) { continue }
      let directory = stack.fd
      let entryName = FileName(item.name).bytes
      let path = level.components.count < pathPrefix ? level.components + [entryName] : level.components
      let st: stat
      do throws(Errno) { st = try Sys.fstatat(directory, item.name, AT_SYMLINK_NOFOLLOW) } catch
        where error == .noEntry
      {
        continue
      }
      if st.st_mode & S_IFMT == S_IFDIR {
        let fd: Int32
        do throws(Errno) {
          fd = try Sys.openat(directory, item.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        } catch  where error == .noEntry || error == .notDirectory {
          continue
        }
        try stack.enter(fd, payload: Level(name: entryName, components: path))
        continue
      }
      do throws(Errno) { try Sys.unlinkat(directory, item.name, 0) } catch  where error == .noEntry {
        continue
      }
      removed(path, st)
    }
    return left
  }
}
