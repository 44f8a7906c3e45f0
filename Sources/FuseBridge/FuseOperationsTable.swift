import CFuse
import CFuseDevice
import FilesystemInterface
import Posix
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Holds the filesystem for the session; `fuse_req_userdata` points at it.
final class FilesystemBox {
  let filesystem: any Filesystem
  let configuration: FuseConfiguration
  /// Replies to writes after their stale pages left the kernel's cache.
  let stalePages = StalePageDrops()
  /// Set at INIT: the kernel opens directories on its own (``Filesystem/needsOpendir``).
  let kernelOpensDirectories = Atomic<Bool>(false)
  init(_ filesystem: any Filesystem, _ configuration: FuseConfiguration) {
    self.filesystem = filesystem
    self.configuration = configuration
  }
}

/// The filesystem behind a request.
///
/// `Unmanaged` is safe here: the session keeps the box retained from `fuse_session_new`
/// until after the loop has returned and the session is destroyed.
@inline(__always)
private func filesystem(_ req: fuse_req_t?) -> any Filesystem {
  box(req).filesystem
}

/// A deferred forget: the session's filesystem box, the node, the count.
private let forgetLater: cfuse_deferred_fn = { box, node, count in
  Unmanaged<FilesystemBox>.fromOpaque(box!).takeUnretainedValue().filesystem.forget(
    NodeID(rawValue: node), count: count)
}

// MARK: - Replies (the only callers of fuse_reply_*)

@inline(__always)
private func reply(_ req: fuse_req_t?, _ error: Errno) {
  fuse_reply_err(req, error.rawValue)
}

@inline(__always)
private func reply(_ req: fuse_req_t?, _ entry: Entry) {
  var param = entry.parameters
  fuse_reply_entry(req, &param)
}

@inline(__always)
private func apply(_ opened: OpenedFile, to fi: UnsafeMutablePointer<fuse_file_info>) {
  fi.pointee.fh = opened.handle.rawValue
  cfuse_fi_set_keep_cache(fi, opened.keepCache ? 1 : 0)
  cfuse_fi_set_direct_io(fi, opened.directIO ? 1 : 0)
  cfuse_fi_set_cache_readdir(fi, opened.cacheDirectory ? 1 : 0)
  cfuse_fi_set_noflush(fi, opened.noFlush ? 1 : 0)
}

/// Replies to getxattr/listxattr: the size for a probe, ERANGE when too small.
@inline(__always)
private func replyXattr(_ req: fuse_req_t?, _ value: [UInt8], size: Int) {
  if size == 0 {
    fuse_reply_xattr(req, value.count)
  } else if value.count > size {
    reply(req, .outOfRange)
  } else {
    _ = value.withUnsafeBytes { fuse_reply_buf(req, $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count) }
  }
}

private func readdir(
  _ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?,
  plus: Bool
) {
  var filler = FuseDirectoryFiller(request: req!, capacity: size, plus: plus)
  do throws(Errno) {
    try filesystem(req).readdir(
      Caller(req!), node: NodeID(rawValue: ino), handle: FileHandle(rawValue: fi!.pointee.fh), offset: offset,
      filler: &filler)
    filler.reply()
  } catch {
    // An error after some entries were added would lose their lookups: reply with what
    // fits instead, as passthrough_hp does.
    if filler.isEmpty {
      filler.discard()
      reply(req, error)
    } else {
      filler.reply()
    }
  }
}

// MARK: - The operations table

/// Builds the `fuse_lowlevel_ops` table. `nonisolated` with capture-free closures: libfuse
/// calls these on its worker threads, never on the main actor.
/// - Parameter flush: whether to serve `flush`. Every open asks the kernel not to send it
///   (`FOPEN_NOFLUSH`), which the kernel ignores under its writeback cache: there it
///   writes the file's dirty pages back at each close and then sends `flush`, unless it was
///   answered ENOSYS once (libfuse's answer to an operation it has no handler for), after
///   which it sends none on the mount. The daemon has nothing to do in it.
nonisolated func makeOperations(flush: Bool) -> fuse_lowlevel_ops {
  var ops = fuse_lowlevel_ops()
  ops.`init` = { userdata, conn in
    let box = Unmanaged<FilesystemBox>.fromOpaque(userdata!).takeUnretainedValue()
    box.configuration.apply(to: conn!)
    box.kernelOpensDirectories.store(
      !box.filesystem.needsOpendir && conn!.pointee.capable & cfuse_cap_no_opendir_support() != 0,
      ordering: .releasing)
  }
  ops.lookup = { req, parent, name in
    do throws(Errno) {
      reply(req, try filesystem(req).lookup(Caller(req!), parent: NodeID(rawValue: parent), name: FileName(name!)))
    } catch { reply(req, error) }
  }
  ops.forget = { req, ino, count in
    // Over /dev/fuse after the next reply (CFuseDevice's deferred.c): a forget may close an
    // unlinked file, freeing it, and the kernel sends one after each unlink, just before its
    // next request. Over io_uring at once: the requests come through the rings.
    cfuse_device_defer(forgetLater, fuse_req_userdata(req), ino, count)
    fuse_reply_none(req)
  }
  ops.forget_multi = { req, count, forgets in
    let fs = filesystem(req)
    for item in UnsafeBufferPointer(start: forgets, count: count) {
      fs.forget(NodeID(rawValue: item.ino), count: item.nlookup)
    }
    fuse_reply_none(req)
  }
  ops.getattr = { req, ino, fi in
    do throws(Errno) {
      var st = try filesystem(req).getattr(
        Caller(req!), node: NodeID(rawValue: ino), handle: fi.map { FileHandle(rawValue: $0.pointee.fh) })
      fuse_reply_attr(req, &st, attributeTimeout(req, ino, st))
    } catch { reply(req, error) }
  }
  ops.setattr = { req, ino, attr, toSet, fi in
    do throws(Errno) {
      var st = try filesystem(req).setattr(
        Caller(req!), node: NodeID(rawValue: ino), attributes: attr!.pointee,
        fields: SetAttributes(fuse: toSet), handle: fi.map { FileHandle(rawValue: $0.pointee.fh) })
      fuse_reply_attr(req, &st, attributeTimeout(req, ino, st))
    } catch { reply(req, error) }
  }
  ops.readlink = { req, ino in
    do throws(Errno) {
      var target = try filesystem(req).readlink(Caller(req!), node: NodeID(rawValue: ino))
      target.append(0)
      target.withUnsafeBytes { _ = fuse_reply_readlink(req, $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
    } catch { reply(req, error) }
  }
  ops.mknod = { req, parent, name, mode, rdev in
    do throws(Errno) {
      reply(
        req,
        try filesystem(req).mknod(
          Caller(req!), parent: NodeID(rawValue: parent), name: FileName(name!), mode: mode, device: rdev))
    } catch { reply(req, error) }
  }
  ops.mkdir = { req, parent, name, mode in
    do throws(Errno) {
      reply(
        req,
        try filesystem(req).mkdir(Caller(req!), parent: NodeID(rawValue: parent), name: FileName(name!), mode: mode))
    } catch { reply(req, error) }
  }
  ops.unlink = { req, parent, name in
    do throws(Errno) {
      try filesystem(req).unlink(Caller(req!), parent: NodeID(rawValue: parent), name: FileName(name!))
      fuse_reply_err(req, 0)
    } catch { reply(req, error) }
  }
  ops.rmdir = { req, parent, name in
    do throws(Errno) {
      try filesystem(req).rmdir(Caller(req!), parent: NodeID(rawValue: parent), name: FileName(name!))
      fuse_reply_err(req, 0)
    } catch { reply(req, error) }
  }
  ops.symlink = { req, target, parent, name in
    do throws(Errno) {
      reply(
        req,
        try filesystem(req).symlink(
          Caller(req!), target: FileName(target!), parent: NodeID(rawValue: parent), name: FileName(name!)))
    } catch { reply(req, error) }
  }
  ops.rename = { req, parent, name, newParent, newName, flags in
    do throws(Errno) {
      try filesystem(req).rename(
        Caller(req!), parent: NodeID(rawValue: parent), name: FileName(name!), newParent: NodeID(rawValue: newParent),
        newName: FileName(newName!), flags: flags)
      fuse_reply_err(req, 0)
    } catch { reply(req, error) }
  }
  ops.link = { req, ino, newParent, newName in
    do throws(Errno) {
      reply(
        req,
        try filesystem(req).link(
          Caller(req!), node: NodeID(rawValue: ino), newParent: NodeID(rawValue: newParent), newName: FileName(newName!)
        ))
    } catch { reply(req, error) }
  }
  ops.open = { req, ino, fi in
    do throws(Errno) {
      let opened = try filesystem(req).open(Caller(req!), node: NodeID(rawValue: ino), flags: fi!.pointee.flags)
      apply(opened, to: fi!)
      let sent =
        if let backing = opened.backing {
          cfuse_reply_open_backing(req, fi, backing.rawValue)
        } else {
          fuse_reply_open(req, fi)
        }
      if sent == -ENOENT {
        // The opener was interrupted: nobody will release this handle.
        filesystem(req).release(Caller(req!), node: NodeID(rawValue: ino), handle: opened.handle)
      }
    } catch { reply(req, error) }
  }
  ops.create = { req, parent, name, mode, fi in
    do throws(Errno) {
      let (entry, opened) = try filesystem(req).create(
        Caller(req!), parent: NodeID(rawValue: parent), name: FileName(name!), mode: mode, flags: fi!.pointee.flags)
      apply(opened, to: fi!)
      var param = entry.parameters
      let sent =
        if let backing = opened.backing {
          cfuse_reply_create_backing(req, &param, fi, backing.rawValue)
        } else {
          fuse_reply_create(req, &param, fi)
        }
      if sent == -ENOENT {
        filesystem(req).release(Caller(req!), node: entry.node, handle: opened.handle)
        filesystem(req).forget(entry.node, count: 1)
      }
    } catch { reply(req, error) }
  }
  ops.read = { req, ino, size, offset, fi in
    do throws(Errno) {
      switch try filesystem(req).read(
        Caller(req!), node: NodeID(rawValue: ino), handle: FileHandle(rawValue: fi!.pointee.fh), count: size,
        offset: offset)
      {
      case .file(let fd, let from, let count):
        _ = cfuse_reply_read(req, fd, from, count)
      }
    } catch { reply(req, error) }
  }
  ops.write_buf = { req, ino, buffers, offset, fi in
    do throws(Errno) {
      let written = try filesystem(req).write(
        Caller(req!), node: NodeID(rawValue: ino), handle: FileHandle(rawValue: fi!.pointee.fh),
        data: FuseWriteData(buffers: buffers!, file: fi!),
        offset: offset)
      if let pages = written.stalePages, case let queue = cfuse_device_ring_queue(), queue >= 0 {
        // An io_uring entry's request is answered on its worker (see StalePageDrops).
        box(req).stalePages.drop(
          pages, of: NodeID(rawValue: ino), queue: Int(queue), entries: Int(cfuse_device_ring_entries()))
        fuse_reply_write(req, written.count)
      } else if let pages = written.stalePages {
        // Not on this thread, which reads requests (see StalePageDrops).
        box(req).stalePages.reply(req!, count: written.count, node: NodeID(rawValue: ino), after: pages)
      } else {
        fuse_reply_write(req, written.count)
      }
    } catch { reply(req, error) }
  }
  if flush {
    ops.flush = { req, ino, fi in
      do throws(Errno) {
        try filesystem(req).flush(
          Caller(req!), node: NodeID(rawValue: ino), handle: FileHandle(rawValue: fi!.pointee.fh))
        fuse_reply_err(req, 0)
      } catch { reply(req, error) }
    }
  }
  ops.release = { req, ino, fi in
    filesystem(req).release(Caller(req!), node: NodeID(rawValue: ino), handle: FileHandle(rawValue: fi!.pointee.fh))
    fuse_reply_err(req, 0)
  }
  ops.fsync = { req, ino, datasync, fi in
    do throws(Errno) {
      try filesystem(req).fsync(
        Caller(req!), node: NodeID(rawValue: ino), handle: FileHandle(rawValue: fi!.pointee.fh), dataOnly: datasync != 0
      )
      fuse_reply_err(req, 0)
    } catch { reply(req, error) }
  }
  ops.opendir = { req, ino, fi in
    if box(req).kernelOpensDirectories.load(ordering: .acquiring) {
      reply(req, .notImplemented)  // the kernel's cue to stop sending opendir and releasedir
      return
    }
    do throws(Errno) {
      let opened = try filesystem(req).opendir(
        Caller(req!), node: NodeID(rawValue: ino), flags: fi!.pointee.flags)
      apply(opened, to: fi!)
      if fuse_reply_open(req, fi) == -ENOENT {
        filesystem(req).releasedir(Caller(req!), node: NodeID(rawValue: ino), handle: opened.handle)
      }
    } catch { reply(req, error) }
  }
  ops.readdir = { req, ino, size, offset, fi in readdir(req, ino, size, offset, fi, plus: false) }
  ops.readdirplus = { req, ino, size, offset, fi in readdir(req, ino, size, offset, fi, plus: true) }
  ops.releasedir = { req, ino, fi in
    filesystem(req).releasedir(Caller(req!), node: NodeID(rawValue: ino), handle: FileHandle(rawValue: fi!.pointee.fh))
    fuse_reply_err(req, 0)
  }
  ops.fsyncdir = { req, ino, datasync, fi in
    do throws(Errno) {
      try filesystem(req).fsyncdir(
        Caller(req!), node: NodeID(rawValue: ino), handle: FileHandle(rawValue: fi!.pointee.fh), dataOnly: datasync != 0
      )
      fuse_reply_err(req, 0)
    } catch { reply(req, error) }
  }
  ops.statfs = { req, ino in
    do throws(Errno) {
      var st = try filesystem(req).statfs(Caller(req!), node: NodeID(rawValue: ino))
      fuse_reply_statfs(req, &st)
    } catch { reply(req, error) }
  }
  ops.setxattr = { req, ino, name, value, size, flags in
    do throws(Errno) {
      try filesystem(req).setxattr(
        Caller(req!), node: NodeID(rawValue: ino), name: FileName(name!),
        value: UnsafeRawBufferPointer(start: value, count: size),
        flags: flags)
      fuse_reply_err(req, 0)
    } catch { reply(req, error) }
  }
  ops.getxattr = { req, ino, name, size in
    do throws(Errno) {
      replyXattr(
        req, try filesystem(req).getxattr(Caller(req!), node: NodeID(rawValue: ino), name: FileName(name!)), size: size)
    } catch { reply(req, error) }
  }
  ops.listxattr = { req, ino, size in
    do throws(Errno) {
      replyXattr(req, try filesystem(req).listxattr(Caller(req!), node: NodeID(rawValue: ino)), size: size)
    } catch { reply(req, error) }
  }
  ops.removexattr = { req, ino, name in
    do throws(Errno) {
      try filesystem(req).removexattr(Caller(req!), node: NodeID(rawValue: ino), name: FileName(name!))
      fuse_reply_err(req, 0)
    } catch { reply(req, error) }
  }
  ops.access = { req, ino, mask in
    do throws(Errno) {
      try filesystem(req).access(Caller(req!), node: NodeID(rawValue: ino), mask: mask)
      fuse_reply_err(req, 0)
    } catch { reply(req, error) }
  }
  ops.fallocate = { req, ino, mode, offset, length, fi in
    do throws(Errno) {
      try filesystem(req).fallocate(
        Caller(req!), node: NodeID(rawValue: ino), handle: FileHandle(rawValue: fi!.pointee.fh), mode: mode,
        offset: offset,
        length: length)
      fuse_reply_err(req, 0)
    } catch { reply(req, error) }
  }
  ops.lseek = { req, ino, offset, whence, fi in
    do throws(Errno) {
      fuse_reply_lseek(
        req,
        try filesystem(req).lseek(
          Caller(req!), node: NodeID(rawValue: ino), handle: FileHandle(rawValue: fi!.pointee.fh), offset: offset,
          whence: whence))
    } catch { reply(req, error) }
  }
  ops.copy_file_range = { req, inIno, inOffset, inFi, outIno, outOffset, outFi, length, flags in
    do throws(Errno) {
      fuse_reply_write(
        req,
        try filesystem(req).copyFileRange(
          Caller(req!), from: NodeID(rawValue: inIno), handle: FileHandle(rawValue: inFi!.pointee.fh), offset: inOffset,
          to: NodeID(rawValue: outIno), handle: FileHandle(rawValue: outFi!.pointee.fh), offset: outOffset,
          count: length, flags: flags))
    } catch { reply(req, error) }
  }
  return ops
}

/// How long the kernel may cache attributes `st` of node `ino` (the configured time, but
/// none where the filesystem says so).
@inline(__always)
private func attributeTimeout(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ st: stat) -> Double {
  let box = box(req)
  return box.filesystem.cachesAttributes(of: NodeID(rawValue: ino))
    ? box.configuration.timeouts.attributeTimeout(for: st) : 0
}

@inline(__always)
private func box(_ req: fuse_req_t?) -> FilesystemBox {
  Unmanaged<FilesystemBox>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
}
