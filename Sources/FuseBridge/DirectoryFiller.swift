import CFuse

#if canImport(Glibc)
  import Glibc
#endif

/// The reply buffer of one readdir request.
public struct DirectoryFiller: ~Copyable {
  let request: fuse_req_t
  let buffer: UnsafeMutableRawBufferPointer
  var used = 0
  /// Whether this is `readdirplus` (entries carry attributes and hold a lookup).
  public let plus: Bool

  init(request: fuse_req_t, capacity: Int, plus: Bool) {
    self.request = request
    buffer = .allocate(byteCount: capacity, alignment: 8)
    self.plus = plus
  }

  /// Adds a plain entry (`st_ino` and the type bits of `st_mode` are used).
  /// - Returns: false, adding nothing, when the buffer is full.
  public mutating func add(name: UnsafePointer<CChar>, attributes: stat, nextOffset: off_t) -> Bool {
    var st = attributes
    let remaining = buffer.count - used
    let needed = fuse_add_direntry(
      request, buffer.baseAddress!.advanced(by: used).assumingMemoryBound(to: CChar.self), remaining, name, &st,
      nextOffset)
    guard needed <= remaining else { return false }
    used += needed
    return true
  }

  /// Adds a readdirplus entry. The caller has already taken the lookup `entry` carries and
  /// must give it back when this returns false.
  /// - Returns: false, adding nothing, when the buffer is full.
  public mutating func add(name: UnsafePointer<CChar>, entry: Entry, nextOffset: off_t) -> Bool {
    var param = entry.parameters
    let remaining = buffer.count - used
    let needed = fuse_add_direntry_plus(
      request, buffer.baseAddress!.advanced(by: used).assumingMemoryBound(to: CChar.self), remaining, name, &param,
      nextOffset)
    guard needed <= remaining else { return false }
    used += needed
    return true
  }

  /// Whether no entry was added yet.
  public var isEmpty: Bool { used == 0 }

  consuming func reply() {
    fuse_reply_buf(request, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), used)
    buffer.deallocate()
  }

  consuming func discard() {
    buffer.deallocate()
  }
}
