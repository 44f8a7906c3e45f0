import CFuse
import FilesystemInterface
import Posix

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - From libfuse's request types to the filesystem interface's values

/// A request's supplementary groups, read by libfuse from `/proc` only when asked.
struct FuseRequestGroups: SupplementaryGroups {
  let request: fuse_req_t

  func supplementaryGroups() -> [gid_t] {
    var groups = [gid_t](repeating: 0, count: 64)
    var count = Int(fuse_req_getgroups(request, Int32(groups.count), &groups))
    if count > groups.count {
      groups = [gid_t](repeating: 0, count: count)
      count = Int(fuse_req_getgroups(request, Int32(groups.count), &groups))
    }
    return Array(groups[..<max(0, min(count, groups.count))])
  }
}

extension Caller {
  /// The sender of `request` (`fuse_req_ctx`).
  @inline(__always)
  init(_ request: fuse_req_t) {
    let ctx = fuse_req_ctx(request)!.pointee
    self.init(uid: ctx.uid, gid: ctx.gid, pid: ctx.pid, umask: ctx.umask, groups: FuseRequestGroups(request: request))
  }
}

/// The bytes of a write request, which may sit in memory or in a pipe.
struct FuseWriteData: WriteData {
  let buffers: UnsafeMutablePointer<fuse_bufvec>
  let origin: WriteOrigin

  /// The request's bytes; `file` tells where they come from (libfuse copies the write
  /// request's flags into it: the kernel's writeback bit and the file's open flags).
  init(buffers: UnsafeMutablePointer<fuse_bufvec>, file: UnsafePointer<fuse_file_info>) {
    self.buffers = buffers
    if cfuse_fi_writepage(file) != 0 {
      origin = .writeback
    } else {
      origin = file.pointee.flags & Linux.openDirect != 0 ? .direct : .buffered
    }
  }

  var count: Int { fuse_buf_size(buffers) }

  func write(to fd: Int32, at offset: off_t, limit: Int?) throws(Errno) -> Int {
    if let limit, limit < count { cfuse_bufvec_limit(buffers, limit) }
    let result = cfuse_write_buf_to_fd(buffers, fd, offset)
    if result < 0 { throw Errno(rawValue: Int32(-result)) }
    return result
  }
}

extension SetAttributes {
  /// `FUSE_SET_ATTR_*` bits and the attributes they name.
  private static let fuseBits: [(Int32, SetAttributes)] = [
    (FUSE_SET_ATTR_MODE, .mode), (FUSE_SET_ATTR_UID, .uid), (FUSE_SET_ATTR_GID, .gid),
    (FUSE_SET_ATTR_SIZE, .size), (FUSE_SET_ATTR_ATIME, .atime), (FUSE_SET_ATTR_MTIME, .mtime),
    (FUSE_SET_ATTR_ATIME_NOW, .atimeNow), (FUSE_SET_ATTR_MTIME_NOW, .mtimeNow), (FUSE_SET_ATTR_CTIME, .ctime),
    // The kernel's FATTR_KILL_SUIDGID under FUSE_HANDLE_KILLPRIV_V2.
    (FUSE_SET_ATTR_KILL_SUID, .killSetID),
  ]

  /// The attributes named by libfuse's `to_set` bits (unknown bits are dropped).
  init(fuse toSet: Int32) {
    var fields: SetAttributes = []
    for (bit, field) in Self.fuseBits where toSet & bit != 0 { fields.insert(field) }
    self = fields
  }
}

extension Entry {
  /// libfuse's form of this entry.
  var parameters: fuse_entry_param {
    var param = fuse_entry_param()
    param.ino = node.rawValue
    param.generation = generation
    param.attr = attributes
    param.attr_timeout = attributeTimeout
    param.entry_timeout = entryTimeout
    return param
  }
}
