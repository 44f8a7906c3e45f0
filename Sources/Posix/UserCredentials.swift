#if canImport(Glibc)
  import Glibc
#endif

/// A user's filesystem credentials: uid, gid and supplementary groups, which a thread of
/// a root process takes on to reach files with that user's rights and no more
/// (``ThreadCredentials``: `setfsuid`, `setfsgid`, the thread's own groups).
public struct UserCredentials: Sendable, Equatable {
  /// The user.
  public let uid: uid_t
  /// The primary group.
  public let gid: gid_t
  /// The supplementary groups.
  public let groups: [gid_t]

  /// Credentials as given.
  public init(uid: uid_t, gid: gid_t, groups: [gid_t]) {
    self.uid = uid
    self.gid = gid
    self.groups = groups
  }

  /// `uid` with the group `gid` and the supplementary groups the group database gives the
  /// user (`getgrouplist` of the user's passwd name), as a login of that user gets them;
  /// `gid` alone when the user has no passwd entry, or the lists cannot be read (fewer
  /// groups only take rights away).
  public static func of(uid: uid_t, gid: gid_t) -> UserCredentials {
    var buffer = [CChar](repeating: 0, count: 16 << 10)
    // The name, copied out while the entry's strings (in `buffer`) are in reach.
    let name: [CChar]? = buffer.withUnsafeMutableBufferPointer { raw in
      var entry = passwd()
      var result: UnsafeMutablePointer<passwd>?
      guard let base = raw.baseAddress, getpwuid_r(uid, &entry, base, raw.count, &result) == 0, result != nil,
        let name = entry.pw_name
      else { return nil }
      return Array(UnsafeBufferPointer(start: name, count: strlen(name) + 1))
    }
    guard let name else { return UserCredentials(uid: uid, gid: gid, groups: [gid]) }
    var count: Int32 = 64
    while count <= 65536 {
      var groups = [gid_t](repeating: 0, count: Int(count))
      var asked = count
      if getgrouplist(name, gid, &groups, &asked) >= 0 {
        return UserCredentials(uid: uid, gid: gid, groups: Array(groups.prefix(Int(asked))))
      }
      count = max(asked, count * 2)
    }
    return UserCredentials(uid: uid, gid: gid, groups: [gid])
  }

  /// Runs `body` with the calling thread's filesystem credentials switched to these,
  /// and back afterwards (``ThreadCredentials/with(uid:gid:groups:_:)``: a process that
  /// is not root cannot switch, and runs `body` as it is).
  /// - Throws: EIO, without running `body`, when a switch fails; what `body` throws.
  public func asFilesystemUser<R>(_ body: () throws(Errno) -> R) throws(Errno) -> R {
    try groups.withUnsafeBufferPointer { (list) throws(Errno) -> R in
      try ThreadCredentials.with(uid: uid, gid: gid, groups: list, body)
    }
  }
}
