import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// One of this process's open descriptors, as `/proc/self/fd` shows it.
public struct OwnDescriptor: Sendable {
  /// The descriptor number.
  public let fd: Int32
  /// What it refers to: a path, or a kernel name such as `socket:[123]` or `pipe:[4]`.
  public let target: [UInt8]
  /// Opened with `O_PATH`: an inode reference, not an open file.
  public let pathOnly: Bool
}

extension Sys {
  /// This process's open descriptors, from `/proc/self/fd` (a process may always read its
  /// own, even where another process of the same uid may not read them: after a change of
  /// credentials, without CAP_SYS_PTRACE). A descriptor closed while the list is read is
  /// left out; the descriptor used for the listing is not in it.
  public static func ownDescriptors() throws(Errno) -> [OwnDescriptor] {
    let listing = try openat(AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    let stream = try DirectoryStream(fd: listing)
    var found: [OwnDescriptor] = []
    while let item = try stream.next() {
      guard let fd = Int32(String(cString: item.name)), fd != stream.fd else { continue }
      let flags = cposix_fcntl_int(fd, F_GETFL, 0)
      guard flags >= 0 else { continue }  // closed meanwhile
      let target: [UInt8]
      do throws(Errno) { target = try path(of: fd) } catch  where error == .noEntry || error == .badFileDescriptor {
        continue  // closed meanwhile
      }
      found.append(OwnDescriptor(fd: fd, target: target, pathOnly: flags & Linux.openPath != 0))
    }
    return found
  }
}
