import AppBoxEvents
import Foundation
import Posix

/// The event logs of one mountpoint (docs/reference.md, "Events"): a directory in its
/// owner's runtime directory, `<hash>.events.d` (0700), with one log per mount named by the
/// mount's id, `ID.jsonl`, and `ID.1.jsonl` once the daemon has rotated it. Readers believe
/// only a directory and files of the mount's owner that no one else may write, and open a
/// log without blocking (a FIFO put in its place holds no reader up). A mount's directory is
/// reached through its runtime directory's descriptor (``location``), so that no rename of
/// a directory on the runtime directory's path redirects the daemon or a reader.
struct EventLogDirectory {
  /// The directory's path (for messages, and for programs told where a log is).
  let path: String
  /// The path it is opened by: ``path``, or the same directory through its runtime
  /// directory's descriptor (`/proc/self/fd/N/HASH.events.d`).
  let location: String
  /// Who must own it and its logs.
  let owner: uid_t
  /// The runtime directory ``location`` goes through, kept (and its descriptor open) as
  /// long as this is.
  private let runtime: RuntimeDirectory?

  /// The directory at `path`, owned by `owner`, opened by that path.
  init(path: String, owner: uid_t) {
    self.path = path
    self.location = path
    self.owner = owner
    runtime = nil
  }

  /// The event log directory of the mount whose runtime files are `files`, owned by
  /// `owner`, opened through the runtime directory's descriptor.
  init(_ files: MountFiles, owner: uid_t) {
    path = files.eventLogs
    location = files.eventLogsThroughDirectory
    self.owner = owner
    runtime = files.directory
  }

  /// How many earlier mounts' logs, and how many bytes of them, a mountpoint keeps.
  static let retention = EventLogRetention()

  /// The size of a log's segment: ``EventLogLimits``' default, or for tests that rotate
  /// a log on a mount, `$APPBOX_EVENT_SEGMENT_BYTES` (at least 1024).
  static var segmentBytes: Int {
    let standard = EventLogLimits().segmentBytes
    guard let text = ProcessInfo.processInfo.environment["APPBOX_EVENT_SEGMENT_BYTES"], let bytes = Int(text),
      bytes >= 1024
    else { return standard }
    return bytes
  }

  /// One mount's log.
  struct Log {
    /// The mount's id.
    var id: String
    /// Its segments' bytes together.
    var bytes: Int64
    /// When it was last written, in seconds since the Unix epoch.
    var modified: Double
    /// Whether it has a previous segment (rotated).
    var rotated: Bool
  }

  /// The current segment's file name of the log `id`.
  static func currentName(_ id: String) -> String { id + ".jsonl" }
  /// The previous segment's file name of the log `id`.
  static func previousName(_ id: String) -> String { EventLogFormat.previousSegmentPath(of: currentName(id)) }

  // MARK: The daemon's side

  /// Creates the directory if needed and reserves a log for a mount starting now (a new
  /// empty file, made exclusively), then deletes earlier mounts' logs beyond
  /// ``retention`` (newest first kept).
  /// - Returns: the mount's id and the path its log is opened by (through ``location``).
  func createLog() throws(CLIError) -> (id: String, path: String) {
    var newest: String?
    for _ in 0..<64 {
      do { try Sys.mkdir(location, 0o700) } catch {
        if error != .exists { throw CLIError(.osError, "cannot create the event log directory \(path): \(error)") }
      }
      let directory: Int32
      do { directory = try openDirectory() } catch {
        if error.code == .noInput { continue }  // pruned between the two calls: made again
        throw error
      }
      defer { Sys.close(directory) }
      if newest == nil {
        do { newest = try logs().first?.id } catch {
          if error.code == .noInput { continue }  // pruned meanwhile: made again
          throw error
        }
      }
      let id = MountLogID.make(time: Clock.unix(), after: newest)
      do {
        let fd = try Sys.openat(
          directory, Self.currentName(id), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        Sys.close(fd)
        removeBeyondRetention(keeping: id)
        return (id, location + "/" + Self.currentName(id))
      } catch {
        guard error == .exists else { throw CLIError(.osError, "cannot create an event log in \(path): \(error)") }
        newest = id  // taken meanwhile: the next one
      }
    }
    throw CLIError(.osError, "cannot find a free name for an event log in \(path)")
  }

  /// Deletes the logs of earlier mounts that ``retention`` does not keep (best effort: a
  /// file that cannot be deleted stays, and shows in `appbox events --list`).
  private func removeBeyondRetention(keeping current: String) {
    let logs: [Log]
    do { logs = try self.logs() } catch { return }  // unreadable now: the next mount tries again
    let earlier = logs.filter { $0.id != current }.map { (id: $0.id, bytes: $0.bytes) }
    for id in Self.retention.logsToRemove(earlier) { remove(id) }
  }

  /// Deletes the logs last written more than ``EventLogRetention/lifetime`` ago, and the
  /// directory once it is empty (for a mountpoint whose daemon is gone).
  func removeStale(now: Double = Clock.unix()) {
    let logs: [Log]
    do { logs = try self.logs() } catch { return }  // not ours, or gone: nothing to prune
    let stale = logs.filter { $0.modified < now - Self.retention.lifetime }
    for log in stale { remove(log.id) }
    // Only a directory this emptied: an empty one may be a mount's that is starting.
    if !stale.isEmpty && stale.count == logs.count {
      do { try Sys.unlinkat(AT_FDCWD, location, AT_REMOVEDIR) } catch {
        // A log created meanwhile (not empty), or gone already: either is fine.
      }
    }
  }

  /// Deletes every log and the directory (`appbox experiment`'s temporary mounts).
  func removeAll() {
    let logs: [Log]
    do { logs = try self.logs() } catch { return }  // nothing readable to delete
    for log in logs { remove(log.id) }
    do { try Sys.unlinkat(AT_FDCWD, location, AT_REMOVEDIR) } catch {
      // A file of another name stays, and with it the directory.
    }
  }

  private func remove(_ id: String) {
    for name in [Self.previousName(id), Self.currentName(id)] {
      do { try Sys.unlink(location + "/" + name) } catch {
        // Absent (a log never rotated has no previous segment) or not removable: kept.
      }
    }
  }

  // MARK: Readers

  /// The logs kept, newest first (ids sort by start time).
  /// - Throws: 66 when there is no such directory, 77 when it is not the owner's.
  func logs() throws(CLIError) -> [Log] {
    let directory = try openDirectory()
    let stream: DirectoryStream
    do { stream = try DirectoryStream(fd: directory) } catch {
      throw CLIError(.osError, "cannot list \(path): \(error)")
    }
    var found: [String: Log] = [:]
    while true {
      let item: DirectoryStream.Item?
      do { item = try stream.next() } catch { throw CLIError(.osError, "cannot list \(path): \(error)") }
      guard let item else { break }
      let name = String(cString: item.name)
      guard name.hasSuffix(".jsonl") else { continue }
      var id = String(name.dropLast(".jsonl".count))
      let isPrevious = id.hasSuffix(".1")
      if isPrevious { id.removeLast(2) }
      guard MountLogID.isValid(id) else { continue }
      let st: stat
      do { st = try Sys.fstatat(stream.fd, item.name, AT_SYMLINK_NOFOLLOW) } catch { continue }  // gone meanwhile
      guard st.st_mode & S_IFMT == S_IFREG, st.st_uid == owner else { continue }
      var log = found[id] ?? Log(id: id, bytes: 0, modified: 0, rotated: false)
      log.bytes += Int64(st.st_size)
      log.modified = max(log.modified, Double(st.st_mtim.tv_sec))
      log.rotated = log.rotated || isPrevious
      found[id] = log
    }
    return found.values.sorted { $0.id > $1.id }
  }

  /// Opens the segments of the log `id` for reading, oldest first (the previous segment,
  /// if any, then the current one), consistent across a rotation that happens meanwhile.
  /// - Throws: 66 when there is no such log, 77 when a file is not the owner's.
  func openSegments(_ id: String) throws(CLIError) -> [Int32] {
    guard MountLogID.isValid(id) else { throw CLIError(.badValue, "\(id) is not a mount id (appbox events --list)") }
    let directory = try openDirectory()
    defer { Sys.close(directory) }
    for _ in 0..<8 {
      // The current segment first: if a rotation comes between the two opens, the
      // previous one is then the same file, and the pair is opened again.
      guard let current = try openFile(directory, Self.currentName(id)) else {
        throw CLIError(.noInput, "no event log \(id) in \(path) (appbox events --list)")
      }
      guard let previous = try openFile(directory, Self.previousName(id)) else { return [current] }
      if Self.sameFile(current, previous) {
        Sys.close(current)
        Sys.close(previous)
        continue
      }
      return [previous, current]
    }
    throw CLIError(.busy, "the event log \(id) is rotating faster than it can be read")
  }

  /// The segment number the header of the segment open at `fd` names (read at offset 0,
  /// the descriptor's offset unchanged); nil when its first line is no header.
  static func segmentNumber(_ fd: Int32) -> Int? {
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count: Int
    do { count = try buffer.withUnsafeMutableBytes { (raw) throws(Errno) -> Int in try Sys.pread(fd, raw, 0) } } catch {
      return nil  // unreadable: the copy that follows says so
    }
    guard let end = buffer[..<count].firstIndex(of: 0x0A) else { return nil }
    do throws(EventLineError) {
      guard case .log(let header) = try AppBoxEvent.decode(buffer[..<end]) else { return nil }
      return header.segment
    } catch {
      return nil  // no header: a log from before headers
    }
  }

  /// The whole log `id`, its segments in order.
  func read(_ id: String) throws(CLIError) -> [UInt8] {
    var bytes: [UInt8] = []
    for fd in try openSegments(id) {
      defer { Sys.close(fd) }
      do { bytes += try Sys.readToEnd(fd, limit: Self.maximumBytes) } catch {
        throw CLIError(.osError, "cannot read the event log \(id) in \(path): \(error)")
      }
    }
    return bytes
  }

  /// The longest log a reader reads at once (the daemon bounds a log far below it).
  static let maximumBytes = 1 << 30

  /// The directory, opened, if it is the owner's and no one else may write it.
  private func openDirectory() throws(CLIError) -> Int32 {
    let fd: Int32
    do { fd = try Sys.openat(AT_FDCWD, location, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) } catch {
      if error == .noEntry { throw CLIError(.noInput, "no event logs in \(path)") }
      throw CLIError(.noPermission, "cannot open the event log directory \(path): \(error)")
    }
    let st: stat
    do { st = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw CLIError(.osError, "cannot read \(path): \(error)")
    }
    guard st.st_uid == owner, st.st_mode & 0o022 == 0 else {
      Sys.close(fd)
      throw CLIError(.noPermission, "\(path) is not the event log directory of uid \(owner)'s daemon")
    }
    return fd
  }

  /// A segment, opened, if it exists; refused unless a regular file of the owner's. Opened
  /// with `O_NONBLOCK` (which a regular file ignores): a FIFO put in its place is refused
  /// at once instead of blocking the reader until someone writes to it.
  private func openFile(_ directory: Int32, _ name: String) throws(CLIError) -> Int32? {
    let fd: Int32
    do { fd = try Sys.openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) } catch {
      if error == .noEntry { return nil }
      throw CLIError(.noPermission, "cannot read \(path)/\(name): \(error)")
    }
    let st: stat
    do { st = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw CLIError(.osError, "cannot read \(path)/\(name): \(error)")
    }
    guard st.st_mode & S_IFMT == S_IFREG, st.st_uid == owner else {
      Sys.close(fd)
      throw CLIError(.noPermission, "\(path)/\(name) is not an event log of uid \(owner)'s daemon")
    }
    return fd
  }

  private static func sameFile(_ a: Int32, _ b: Int32) -> Bool {
    do {
      let (x, y) = (try Sys.fstat(a), try Sys.fstat(b))
      return x.st_ino == y.st_ino && x.st_dev == y.st_dev
    } catch {
      return false  // the opens worked: fstat does not fail on them
    }
  }
}

extension EventLogDirectory {
  /// The event logs of a live mount, in its owner's runtime directory.
  init(_ target: ControlClient.Target) {
    self.init(target.files, owner: target.owner)
  }

  /// The current mount's id, as its daemon tells (`appbox status`'s `eventLog.id`).
  /// - Throws: the control channel's errors; 75 when the daemon names no valid id.
  static func currentID(of target: ControlClient.Target) throws(CLIError) -> String {
    let reply = try ControlClient.send("status", to: target)
    guard let status = ControlClient.object(reply)["status"] as? [String: Any],
      let log = status["eventLog"] as? [String: Any], let id = log["id"] as? String, MountLogID.isValid(id)
    else { throw CLIError(.busy, "the daemon of \(target.mountpoint) names no event log") }
    return id
  }

  /// The path of the current mount's log (what `appbox run` gives its program as
  /// `APPBOX_EVENTS`).
  static func currentPath(of target: ControlClient.Target) throws(CLIError) -> String {
    target.files.eventLogs + "/" + currentName(try currentID(of: target))
  }
}
