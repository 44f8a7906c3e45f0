import AppBoxFS
import Foundation
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A device mount's runs of `appbox run --app`, each a cgroup v2 group
/// (docs/architecture.md#app-confinement): the daemon makes `appbox/<mount id>.<daemon pid>/run-N` in
/// the unified hierarchy, owned by root and mode 0755, so that a process in it that is not
/// root can neither leave it nor move another process in (both need write access to a
/// group above); the run's keeper starts the program in it (clone3 with
/// CLONE_INTO_CGROUP), and the kernel puts everything the program starts there too. A
/// request's thread is mapped to its app through `/proc/TID/cgroup`, read once per
/// thread and kept while a descriptor of that thread (`pidfd_open`, `PIDFD_THREAD`) says
/// it lives: a thread id is reused only after its thread has exited, so no later thread
/// inherits another's answer.
final class RunGroups: RunMembership {
  /// The mount's directory in the hierarchy: `appbox/<mount id>.<daemon pid>` (for groups and for
  /// `/proc/TID/cgroup`), and its path.
  private let name: String
  /// Where the daemon mounts the unified hierarchy when none is mounted (root only).
  static let hierarchyMountpoint = "/run/appbox/cgroup2"

  /// One thread's answer, kept until its descriptor says it has exited.
  private final class Record: Sendable {
    let run: RunAccess?
    let thread: ThreadDescriptor
    let tid: pid_t
    let key: UInt64
    /// Set by the watcher once the thread has exited.
    let exited = Atomic<Bool>(false)
    init(run: RunAccess?, thread: consuming ThreadDescriptor, tid: pid_t, key: UInt64) {
      self.run = run
      self.thread = thread
      self.tid = tid
      self.key = key
    }
  }

  private struct State: Sendable {
    /// The hierarchy's mountpoint, once found or mounted.
    var hierarchy: String?
    /// Each run's group (its path in the hierarchy, as `/proc/TID/cgroup` shows it) and app.
    var runs: [[UInt8]: RunAccess] = [:]
    /// Each run's keeper: its group is not removed while the keeper lives (it is empty
    /// until the keeper has started the program in it).
    var keepers: [[UInt8]: ProcessIdentity] = [:]
    var next = 1
    var records: [pid_t: Record] = [:]
    /// The same records by key, for the watcher.
    var byKey: [UInt64: Record] = [:]
    var nextKey: UInt64 = 1
    var watching = false
    /// The mount's directory, open with a shared `flock` for the daemon's life: the claim
    /// that tells a later daemon this mount's groups are not abandoned.
    var claim: Int32?
  }

  /// Lock order: a leaf. Held across no syscall but a group's `mkdir` and the `close` of
  /// dropped records.
  private let state = Mutex(State())
  /// Whether any run's group exists (read on every request under `Containers/`).
  private let runCount = Atomic<Int>(0)
  /// Threads remembered at most; past that the memory starts afresh (each record holds a
  /// descriptor).
  static let recordLimit = 256

  /// Learns of exited threads (nil when no epoll set could be made: then each hit polls
  /// its thread's descriptor).
  private let exits: ThreadExitWatch?
  /// Whether the watcher's epoll set failed.
  private let watchFailed = Atomic<Bool>(false)

  /// The runs of the mount with log id `mountID`, served by this process. The id is unique
  /// per mountpoint only (two devices mounted in one second share it): the daemon's pid
  /// makes the directory's name its own.
  init(mountID: String) {
    name = "appbox/\(mountID).\(getpid())"
    exits = try? ThreadExitWatch()  // absent: the slower, equally exact poll per request
  }

  var hasRuns: Bool { runCount.load(ordering: .acquiring) > 0 }

  func run(of tid: pid_t) throws(Errno) -> RunAccess? {
    let known = state.withLock { $0.records[tid] }
    if let known {
      let exited =
        exits == nil || watchFailed.load(ordering: .acquiring)
        ? known.thread.hasExited : known.exited.load(ordering: .acquiring)
      if !exited { return known.run }
    }
    // Opened before the group is read: if the thread still lives after the read, the read
    // was about this thread, not a later one with its id.
    let thread = try ThreadDescriptor(thread: tid)
    let group = try ControlGroups.group(of: tid)
    if thread.hasExited { throw Errno(rawValue: ESRCH) }
    let (run, key, startWatcher) = state.withLock { state in
      let key = state.nextKey
      state.nextKey += 1
      defer { state.watching = true }
      return (Self.run(of: group, in: state.runs), key, !state.watching && exits != nil)
    }
    let record = Record(run: run, thread: thread, tid: tid, key: key)
    if let exits {
      // Watched before it is found: an exit from now on marks it (one that came already is
      // reported at once).
      try exits.watch(record.thread, key: key)
    }
    state.withLock { state in
      if state.records.count >= Self.recordLimit {
        state.records.removeAll()
        state.byKey.removeAll()
      }
      state.records[tid] = record
      state.byKey[key] = record
    }
    if startWatcher { startWatching() }
    return run
  }

  /// Starts the thread that marks records whose thread has exited and forgets them.
  private func startWatching() {
    guard let exits else { return }
    let thread = Thread { [self] in
      while true {
        let keys = exits.waitForExits()
        if keys.isEmpty {
          // The set failed: every hit polls its thread's descriptor from now on.
          watchFailed.store(true, ordering: .releasing)
          return
        }
        state.withLock { state in
          for key in keys {
            guard let record = state.byKey.removeValue(forKey: key) else { continue }
            record.exited.store(true, ordering: .releasing)
            if state.records[record.tid] === record { state.records[record.tid] = nil }
          }
        }
      }
    }
    thread.name = "appbox-run-exits"
    thread.start()
  }

  /// The run whose group is `group` or above it.
  private static func run(of group: [UInt8], in runs: [[UInt8]: RunAccess]) -> RunAccess? {
    if let run = runs[group] { return run }
    var prefix = group
    while let slash = prefix.lastIndex(of: UInt8(ascii: "/")), slash > 0 {
      prefix.removeSubrange(slash...)
      if let run = runs[prefix] { return run }
    }
    return nil
  }

  /// Makes a new run's group for `access`'s app, started by `keeper` (and, the first time,
  /// finds or mounts the hierarchy and makes the mount's directory); groups of earlier
  /// runs that are empty and whose keeper has ended are removed first.
  /// - Returns: the group's path, for the keeper to start the program in.
  /// - Throws: a message saying why confinement is not available here.
  func newRun(_ access: RunAccess, keeper: ProcessIdentity) throws(CLIError) -> String {
    removeEmptyGroups()
    let hierarchy = try self.hierarchy()
    do throws(Errno) { try claimDirectory(in: hierarchy) } catch {
      throw CLIError(
        .unavailable, "cannot make the run's control group in \(hierarchy): \(error) (app confinement needs root)")
    }
    return try state.withLock { (state) throws(CLIError) -> String in
      var group: String
      while true {
        group = "/\(name)/run-\(state.next)"
        state.next += 1
        do throws(Errno) {
          try ControlGroups.makeGroup(hierarchy + group)
          break
        } catch  where error == .exists {
          continue  // left by an earlier daemon with this name (its pid reused): the next number
        } catch {
          throw CLIError(.unavailable, "cannot make the control group \(hierarchy + group): \(error)")
        }
      }
      state.runs[Array(group.utf8)] = access
      state.keepers[Array(group.utf8)] = keeper
      runCount.store(state.runs.count, ordering: .releasing)
      return hierarchy + group
    }
  }

  /// Makes the mount's directory (`appbox/<mount id>.<daemon pid>`) and claims it for this daemon's life,
  /// once; the first time, also removes what daemons that ended without unmounting (`kill
  /// -9`) left: their empty groups and directories, which no daemon claims any more.
  private func claimDirectory(in hierarchy: String) throws(Errno) {
    guard state.withLock({ $0.claim == nil }) else { return }
    let top = hierarchy + "/appbox"
    let base = hierarchy + "/" + name
    do throws(Errno) { try ControlGroups.makeGroup(top) } catch  where error == .exists {}
    removeAbandonedDirectories(in: top)
    // Another daemon's sweep may remove the directory between its making and the claim:
    // the claim holds only on the directory the path still names.
    for _ in 0..<3 {
      do throws(Errno) { try ControlGroups.makeGroup(base) } catch  where error == .exists {}
      let fd = try Sys.open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
      do throws(Errno) {
        try ControlGroups.claim(fd)
        if try Sys.fstat(fd).st_ino == Sys.lstatPath(base).st_ino {
          // Two first runs at once both claim: one descriptor is kept.
          let kept = state.withLock { state in
            if state.claim == nil { state.claim = fd }
            return state.claim == fd
          }
          if !kept { Sys.close(fd) }
          return
        }
      } catch  where error == .noEntry {
        // removed meanwhile: made again
      } catch {
        Sys.close(fd)
        throw error
      }
      Sys.close(fd)
    }
    throw Errno.busy
  }

  /// Removes the run groups and directories under `top` of mounts whose daemon has ended
  /// (no claim on their directory). A group with a process in it stays (EBUSY), as do the
  /// directories of live daemons and anything this cannot open or lock.
  private func removeAbandonedDirectories(in top: String) {
    let mounts: [String]
    do throws(Errno) {
      let fd = try Sys.open(top, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
      defer { Sys.close(fd) }
      mounts = try ControlGroups.subgroups(of: fd)
    } catch {
      return  // nothing swept: the groups stay, as they did before
    }
    for mount in mounts where "appbox/" + mount != name {
      let path = top + "/" + mount
      // A directory this cannot open, or that a live daemon claims, is left.
      guard let fd = try? Sys.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) else { continue }
      defer { Sys.close(fd) }
      guard (try? Sys.lockExclusively(fd)) != nil else { continue }
      for group in (try? ControlGroups.subgroups(of: fd)) ?? [] where group.hasPrefix("run-") {
        try? ControlGroups.removeGroup(path + "/" + group)  // EBUSY: a process of that run is left
      }
      try? ControlGroups.removeGroup(path)  // EBUSY or ENOTEMPTY: a run group is left
    }
  }

  /// The unified hierarchy's mountpoint: a mounted one, or one mounted now at
  /// ``hierarchyMountpoint`` (which stays, as `/sys/fs/cgroup` does).
  private func hierarchy() throws(CLIError) -> String {
    if let known = state.withLock({ $0.hierarchy }) { return known }
    let found: String
    do throws(Errno) {
      if let mounted = try ControlGroups.mountedHierarchy() {
        found = mounted
      } else {
        guard Sys.effectiveUID == 0 else { throw Errno.notPermitted }
        for path in ["/run/appbox", Self.hierarchyMountpoint] {
          do throws(Errno) { try Sys.mkdir(path, 0o755) } catch  where error == .exists {}
        }
        do throws(Errno) { try ControlGroups.mountHierarchy(at: Self.hierarchyMountpoint) } catch  where error == .busy
        {
          // Mounted meanwhile by another daemon.
        }
        guard try ControlGroups.mountedHierarchy() != nil else { throw Errno.noDevice }
        found = Self.hierarchyMountpoint
      }
    } catch {
      throw CLIError(
        .unavailable,
        "app confinement needs a cgroup v2 hierarchy this daemon can make groups in, and none is mounted nor can be (\(error)): mount the device as root (the program does not run unconfined)"
      )
    }
    state.withLock { $0.hierarchy = found }
    return found
  }

  /// Removes the groups of runs that have ended (no process left in them, and their
  /// keeper gone: a run's group is empty from its making until its keeper's `clone3`,
  /// and another run's start may come in between).
  func removeEmptyGroups() {
    guard let hierarchy = state.withLock({ $0.hierarchy }) else { return }
    let groups = state.withLock { Array($0.runs.keys) }
    for group in groups {
      if let keeper = state.withLock({ $0.keepers[group] }) {
        do throws(Errno) {
          if try Sys.processStat(keeper.pid).startTime == keeper.startTime { continue }  // starting, or waiting
        } catch  where error == .noEntry || error == Errno(rawValue: ESRCH) {
          // ended: the group may go once empty
        } catch {
          continue  // cannot be told: kept, and tried again at the next run
        }
      }
      let path = hierarchy + String(decoding: group, as: UTF8.self)
      do throws(Errno) { try ControlGroups.removeGroup(path) } catch  where error == .busy {
        continue  // a process of the run is still in it
      } catch  where error != .noEntry {
        continue  // kept, and tried again at the next run
      } catch {}
      state.withLock { state in
        state.runs[group] = nil
        state.keepers[group] = nil
        runCount.store(state.runs.count, ordering: .releasing)
      }
    }
  }

  /// At unmount: removes the groups that are empty and the mount's directory if it is.
  func finish() {
    removeEmptyGroups()
    guard let hierarchy = state.withLock({ $0.hierarchy }) else { return }
    do throws(Errno) { try ControlGroups.removeGroup(hierarchy + "/" + name) } catch {
      // A run's process still there keeps the group (and its directory) until it ends;
      // once this daemon has exited, the next device's first run removes them.
    }
    state.withLock { state in
      state.records.removeAll()
      if let claim = state.claim { Sys.close(claim) }
      state.claim = nil
    }
  }
}
