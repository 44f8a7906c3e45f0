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
    let stream: DirectoryStream
    /// Its name in the directory below it on the stack (or in `directoryFD`).
    let name: [UInt8]
    /// Its path below the removed directory.
    let components: [[UInt8]]
  }

  /// Removes `name` in `directoryFD` and its subtree. `removed` hears each entry once it is
  /// gone: its attributes (taken just before) and its path below the removed directory
  /// (empty for the directory itself, last). Entries that vanish meanwhile are skipped; a
  /// directory that a program fills meanwhile (ENOTEMPTY) is left, with what is in it.
  /// - Returns: how many directories were left that way.
  /// - Throws: the first other error (then the rest is left as it is).
  @discardableResult
  static func remove(
    _ name: [UInt8], in directoryFD: Int32, removed: ([[UInt8]], stat) -> Void = { _, _ in }
  ) throws(Errno) -> Int {
    let top = try FileName.withBytes(name) { (cname) throws(Errno) -> Int32 in
      try Sys.openat(directoryFD, cname.cString, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    }
    var stack = [Level(stream: try DirectoryStream(fd: top), name: name, components: [])]
    var left = 0
    while let level = stack.last {
      guard let item = try level.stream.next() else {
        stack.removeLast()
        let st = try Sys.fstat(level.stream.fd)
        let parentFD = stack.last?.stream.fd ?? directoryFD
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
      let entryName = FileName(item.name).bytes
      let st: stat
      do throws(Errno) { st = try Sys.fstatat(level.stream.fd, item.name, AT_SYMLINK_NOFOLLOW) } catch
        where error == .noEntry
      {
        continue
      }
      if st.st_mode & S_IFMT == S_IFDIR {
        let fd: Int32
        do throws(Errno) {
          fd = try Sys.openat(level.stream.fd, item.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        } catch  where error == .noEntry || error == .notDirectory {
          continue
        }
        stack.append(
          Level(stream: try DirectoryStream(fd: fd), name: entryName, components: level.components + [entryName]))
        continue
      }
      do throws(Errno) { try Sys.unlinkat(level.stream.fd, item.name, 0) } catch  where error == .noEntry {
        continue
      }
      removed(level.components + [entryName], st)
    }
    return left
  }
}
