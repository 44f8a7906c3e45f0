import Dispatch
import Posix
import Synchronization

/// Refuses the reads that the kernel serves itself (passthrough) of a file whose class
/// has closed. iOS lets a file's class change while the file is open, and the lock then
/// makes a class-A file unreadable through every handle; the kernel offers no way to take
/// a passthrough handle back, but fanotify's permission events can refuse its reads.
///
/// A file is armed (``PermissionEvents/arm(_:)``) before its backing file is first
/// registered for passthrough, and disarmed when the kernel forgets its inode (so that
/// opening it again costs nothing). While armed, its reads cost a check in the kernel
/// and nothing more. While its class is closed (the lock, the CX timeout) and passthrough
/// handles are open, it is refused: a thread of the daemon answers every read through
/// them (read, pread, sendfile, splice) with EPERM. What a program maps from such a
/// handle is the one thing the kernel lets no one take back (README, Limits). Where
/// fanotify's permission events are missing (they need CAP_SYS_ADMIN, as passthrough
/// does), nothing is armed and no file is opened for passthrough.
final class PassthroughRevocation: Sendable {
  private struct Marks {
    /// Not tried yet, or the group (nil: permission events unavailable).
    var events: PermissionEvents??
    /// Armed inodes.
    var armed: Set<BackingKey> = []
    /// Armed inodes refused now (their class is closed).
    var refused: [BackingKey: Inode] = [:]
  }

  private let marks = Mutex(Marks())

  /// Arms `inode` before it is registered for passthrough.
  /// - Returns: false when permission events are not available (then it must not be).
  /// - Throws: the mark's error (then it must not be either).
  func arm(_ inode: Inode) throws(Errno) -> Bool {
    try marks.withLock { (marks) throws(Errno) -> Bool in
      if marks.armed.contains(inode.key) { return true }
      guard let events = group(&marks) else { return false }
      try events.arm(inode.fd)
      marks.armed.insert(inode.key)
      return true
    }
  }

  /// Disarms `inode` once the kernel forgot it.
  /// - Throws: the mark's error: the mark stays on the inode until the kernel drops it,
  ///   and its reads may ask the daemon, which allows them (it is no longer refused).
  func disarm(_ inode: Inode) throws(Errno) {
    try marks.withLock { (marks) throws(Errno) in
      guard marks.armed.remove(inode.key) != nil, let events = marks.events ?? nil else { return }
      marks.refused[inode.key] = nil
      try events.disarm(inode.fd)
    }
  }

  /// Refuses reads of `inode` through its passthrough handles when `closed`, else allows
  /// them again. Nothing for an inode that is not armed.
  /// - Throws: the mark's error. Refusing: the inode is not listed as refused then, so the
  ///   next change of state tries again. Allowing: it is no longer listed either way, and a
  ///   read that still asks the daemon is allowed.
  func update(_ inode: Inode, closed: Bool) throws(Errno) {
    try marks.withLock { (marks) throws(Errno) in
      guard marks.armed.contains(inode.key), let events = marks.events ?? nil,
        closed != (marks.refused[inode.key] != nil)
      else { return }
      if closed {
        try events.refuse(inode.fd)
        marks.refused[inode.key] = inode
      } else {
        marks.refused[inode.key] = nil
        try events.allow(inode.fd)
      }
    }
  }

  /// The inodes refused now.
  var refusedInodes: [Inode] { marks.withLock { Array($0.refused.values) } }

  /// Whether files can be armed (fanotify's permission events are there).
  var isAvailable: Bool { marks.withLock { group(&$0) != nil } }

  /// How many inodes are armed, and how many of them refused.
  var counts: (armed: Int, refused: Int) { marks.withLock { ($0.armed.count, $0.refused.count) } }

  /// The group, made on first use, with a thread that answers its events: a read of a
  /// refused inode fails.
  private func group(_ marks: inout Marks) -> PermissionEvents? {
    if let tried = marks.events { return tried }
    // A probe, absent its meaning: without a group (no CAP_SYS_ADMIN, no permission
    // events, or any other failure) no file is armed, and none is opened for passthrough.
    let events = try? PermissionEvents()
    marks.events = .some(events)
    // A queue of its own: the loop blocks one of Dispatch's threads for the daemon's life.
    if let events {
      DispatchQueue(label: "appbox.read-guard").async { [weak self] in
        events.answer { device, inode in
          self?.marks.withLock { $0.refused[BackingKey(device: device, inode: inode)] != nil } ?? false
        }
      }
    }
    return events
  }
}
