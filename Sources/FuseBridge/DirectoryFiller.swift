import CFuse
import FilesystemInterface

#if canImport(Glibc)
  import Glibc
#endif

/// The reply buffer of one readdir request, in libfuse's direntry encoding.
struct FuseDirectoryFiller: DirectoryFiller, ~Copyable {
  let request: fuse_req_t
  let buffer: UnsafeMutableRawBufferPointer
  var used = 0
  let plus: Bool

  init(request: fuse_req_t, capacity: Int, plus: Bool) {
    self.request = request
    buffer = .allocate(byteCount: capacity, alignment: 8)
    self.plus = plus
  }

  mutating func add(name: FileName, attributes: stat, nextOffset: off_t) -> Bool {
    var st = attributes
    let remaining = buffer.count - used
    let needed = fuse_add_direntry(
      request, buffer.baseAddress!.advanced(by: used).assumingMemoryBound(to: CChar.self), remaining, name.cString, &st,
      nextOffset)
    guard needed <= remaining else { return false }
    used += needed
    return true
  }

  mutating func add(name: FileName, entry: Entry, nextOffset: off_t) -> Bool {
    var param = entry.parameters
    let remaining = buffer.count - used
    let needed = fuse_add_direntry_plus(
      request, buffer.baseAddress!.advanced(by: used).assumingMemoryBound(to: CChar.self), remaining, name.cString,
      &param,
      nextOffset)
    guard needed <= remaining else { return false }
    used += needed
    return true
  }

  /// Whether no entry was added yet.
  var isEmpty: Bool { used == 0 }

  consuming func reply() {
    fuse_reply_buf(request, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), used)
    buffer.deallocate()
  }

  consuming func discard() {
    buffer.deallocate()
  }
}
