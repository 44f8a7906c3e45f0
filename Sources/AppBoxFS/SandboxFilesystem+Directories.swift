import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// An open directory: its stream, and the offset the stream stands at (-1 when unknown,
/// e.g. after an entry that did not fit the reply).
final class DirectoryHandle: @unchecked Sendable {
  // @unchecked: the kernel serializes readdir calls on one open directory (it holds the
  // file's position lock), so `stream` and `offset` are never touched concurrently.
  let stream: DirectoryStream
  var offset: off_t = 0

  init(stream: DirectoryStream) { self.stream = stream }
}

// MARK: - Directory listings

extension SandboxFilesystem {
  /// A single-app mount's `opendir` decides nothing (the kernel checks permissions; the
  /// listing hides the same names to everyone): the kernel may open directories on its
  /// own, which saves two requests per directory a program opens. A device's `opendir`
  /// confines (`checkReach`, `checkListing`), so it must see every one.
  public var needsOpendir: Bool { device != nil }

  /// `opendir`.
  public func opendir(_ ctx: Caller, node: NodeID, flags: Int32) throws(Errno) -> OpenedFile {
    let directory = inodes.inode(node)
    try checkReach(ctx, directory, "opendir")
    try checkListing(ctx, directory)
    try admitNewHandle(for: ctx)
    // The handle is an owned reference; released by releasedir.
    let handle = Unmanaged.passRetained(try openDirectory(directory))
    openHandles.add(1, ordering: .relaxed)
    // The kernel may keep listings: every change of a directory goes through the mount
    // (which invalidates them), purges included (their entry invalidations do).
    return OpenedFile(
      handle: FileHandle(rawValue: UInt64(UInt(bitPattern: handle.toOpaque()))), keepCache: true, cacheDirectory: true)
  }

  /// A stream of `directory`'s entries, at its start.
  private func openDirectory(_ directory: Inode) throws(Errno) -> DirectoryHandle {
    let fd = try withDescriptors { () throws(Errno) -> Int32 in
      try Sys.reopen(directory.fd, flags: O_RDONLY | O_DIRECTORY | O_CLOEXEC | accessTimeFlag)
    }
    return DirectoryHandle(stream: try DirectoryStream(fd: fd))
  }

  private func directoryHandle(_ handle: FileHandle) -> DirectoryHandle {
    Unmanaged<DirectoryHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle.rawValue))!).takeUnretainedValue()
  }

  /// `readdir` and `readdirplus`. In plus mode each entry but `.` and `..` holds one
  /// lookup, given back when it does not fit. Without a handle (the kernel opened the
  /// directory on its own) a stream opened for this request alone is read from `offset`:
  /// an offset is the backing filesystem's position cookie, valid in any stream of the
  /// directory.
  public func readdir(
    _ ctx: Caller, node: NodeID, handle: FileHandle, offset: off_t, filler: inout some DirectoryFiller & ~Copyable
  )
    throws(Errno)
  {
    let directory = inodes.inode(node)
    let dir = handle == .none ? try openDirectory(directory) : directoryHandle(handle)
    if offset != dir.offset {
      dir.stream.seek(to: offset)
      dir.offset = offset
    }
    while let item = try dir.stream.next() {
      if hides(FileName(item.name), in: directory) { continue }
      var attributes = stat()
      attributes.st_ino = item.inode
      attributes.st_mode = mode_t(item.type) << 12
      let added: Bool
      if !filler.plus {
        added = filler.add(name: FileName(item.name), attributes: attributes, nextOffset: item.nextOffset)
      } else if isDotOrDotDot(item.name) || inodes.count >= inodeLimit(for: ctx) {
        // Node 0: a name without attributes, holding no lookup (for . and .., and when
        // descriptors run short: the kernel looks the name up when it needs it).
        let entry = Entry(node: NodeID(rawValue: 0), attributes: attributes, entryTimeout: 0, attributeTimeout: 0)
        added = filler.add(name: FileName(item.name), entry: entry, nextOffset: item.nextOffset)
      } else {
        do throws(Errno) {
          let entry = try lookupEntry(in: directory, name: FileName(item.name))
          added = filler.add(name: FileName(item.name), entry: entry, nextOffset: item.nextOffset)
          if !added { forget(entry.node, count: 1) }
        } catch  where error == .noEntry {
          added = true  // removed since the stream read it: skip it
        }
      }
      guard added else {
        dir.offset = -1
        return
      }
      dir.offset = item.nextOffset
    }
  }

  /// `releasedir`.
  public func releasedir(_ ctx: Caller, node: NodeID, handle: FileHandle) {
    openHandles.subtract(1, ordering: .relaxed)
    Unmanaged<DirectoryHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle.rawValue))!).release()
  }

  /// `fsyncdir`.
  public func fsyncdir(_ ctx: Caller, node: NodeID, handle: FileHandle, dataOnly: Bool) throws(Errno) {
    let dir = handle == .none ? try openDirectory(inodes.inode(node)) : directoryHandle(handle)
    try Sys.fsync(dir.stream.fd, dataOnly: dataOnly)
  }
}

/// Whether a C name is `.` or `..`.
func isDotOrDotDot(_ name: UnsafePointer<CChar>) -> Bool {
  name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0))
}
