import AppBoxEvents
import Foundation
import Posix
import SandboxPolicy

/// `appbox events`: a mount's event log as JSON Lines, an earlier mount's, or the list of
/// those kept (docs/reference.md, "Events").
extension ControlCommands {
  static let eventsUsage = """
    usage: appbox events [--follow] [--mount-id ID] MOUNTPOINT
           appbox events --list MOUNTPOINT

      Prints a mount's event log as JSON Lines. Each mount has a log of its own, named by
      the mount's id (appbox status shows it); MOUNTPOINT's current mount's by default.
      --mount-id ID prints an earlier mount's log instead; --list lists the logs kept for
      MOUNTPOINT, newest first (also once it is unmounted). --follow keeps reading,
      woken by each append, and exits 0 once the mount is gone.
    """

  /// `appbox events [--follow] [--mount-id ID] MOUNTPOINT`, `appbox events --list MOUNTPOINT`.
  static func events(_ arguments: [String]) throws(CLIError) -> ExitCode {
    var follow = false
    var list = false
    var id: String?
    var positional: [String] = []
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
      switch argument {
      case "--follow", "-f": follow = true
      case "--list": list = true
      case "--mount-id": id = try reader.value()
      case "--help", "-h": throw CLIError(.success, eventsUsage)
      default:
        if argument.hasPrefix("-") { throw CLIError(.usage, "unknown option \(argument)") }
        positional.append(argument)
      }
    }
    guard positional.count == 1 else { throw CLIError(.usage, "give one MOUNTPOINT") }
    guard !(list && (follow || id != nil)) else { throw CLIError(.usage, "--list takes no --follow or --mount-id") }
    let logs = try MountLogs.find(positional[0], needsCurrent: !list && id == nil)
    if list {
      for log in try logs.directory.logs() {
        let notes = [log.id == logs.current ? "current" : nil, log.rotated ? "rotated" : nil].compactMap { $0 }
        print(
          "\(log.id)  \(ByteCount(log.bytes).formatted)" + (notes.isEmpty ? "" : "  " + notes.joined(separator: ", ")))
      }
      return .success
    }
    let chosen = id ?? logs.current!
    var segments = try logs.directory.openSegments(chosen)
    defer { for fd in segments { Sys.close(fd) } }
    let path = logs.directory.path + "/" + EventLogDirectory.currentName(chosen)
    // Watched by the path it is opened by (through the runtime directory's descriptor).
    let watched = logs.directory.location + "/" + EventLogDirectory.currentName(chosen)
    // Only the current mount's log grows.
    let following = follow && chosen == logs.current
    let appends = following ? watchAppends(watched) : nil
    defer { if let appends { Sys.close(appends) } }
    var tail = LineTail()
    for fd in segments.dropLast() { _ = try copy(fd, path: path, tail: &tail) }
    tail = LineTail()
    while true {
      if let nextSegment = try copy(segments[segments.count - 1], path: path, tail: &tail), following {
        // The daemon put a new segment at the path before it wrote the mark; if the log
        // rotated again meanwhile, the segment after the mark is the previous one now.
        tail = LineTail()
        let next = try logs.directory.openSegments(chosen)
        if next.count == 2, EventLogDirectory.segmentNumber(next[0]) == nextSegment {
          segments += next
          _ = try copy(next[0], path: path, tail: &tail)
          tail = LineTail()
        } else {
          for fd in next.dropLast() { Sys.close(fd) }
          segments.append(next[next.count - 1])
        }
        if let appends {
          do throws(Errno) { try Inotify.watchWrites(appends, path: watched) } catch {
            // No watch left: the loop below still looks again every second.
          }
        }
        continue
      }
      guard following, let mountpoint = logs.mountpoint, try MountTable.mount(at: mountpoint) != nil else {
        return .success
      }
      // Woken by the next append, or after a second to see whether the mount is gone.
      if let appends {
        Inotify.wait(appends, seconds: 1)
        Inotify.drain(appends)
      } else {
        Clock.sleep(seconds: 0.1)
      }
    }
  }

  /// The last line read so far, unfinished: where a rotation mark is looked for.
  struct LineTail {
    var bytes: [UInt8] = []
    /// The segment the last complete line sends readers to, if it was a rotation mark.
    var nextSegment: Int?

    /// Takes in what was read next.
    mutating func take(_ chunk: ArraySlice<UInt8>) {
      guard let lastNewline = chunk.lastIndex(of: 0x0A) else {
        if bytes.count < 1 << 16 { bytes += chunk }  // a mark is short: a longer line is no mark
        return
      }
      let before = chunk[..<lastNewline]
      let lineStart = before.lastIndex(of: 0x0A).map { $0 + 1 }
      let line = lineStart.map { Array(chunk[$0..<lastNewline]) } ?? bytes + before
      nextSegment = nil
      if AppBoxEvent.leadingType(line) == "rotate" {
        do throws(EventLineError) {
          if case .rotate(let mark) = try AppBoxEvent.decode(line) { nextSegment = mark.nextSegment }
        } catch {
          // Not a mark after all (a malformed line): the log goes on in this file.
        }
      }
      bytes = Array(chunk[(lastNewline + 1)...])
    }
  }

  /// Copies what `fd` holds from its offset to standard output.
  /// - Returns: the segment that follows when the last complete line is a rotation mark
  ///   (the daemon's last line of a segment), else nil.
  private static func copy(_ fd: Int32, path: String, tail: inout LineTail) throws(CLIError) -> Int? {
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
      let count: Int
      do { count = try buffer.withUnsafeMutableBytes { (raw) throws(Errno) -> Int in try Sys.read(fd, raw) } } catch {
        throw CLIError(.osError, "cannot read \(path): \(error)")
      }
      guard count > 0 else { return tail.bytes.isEmpty ? tail.nextSegment : nil }
      FileHandle.standardOutput.write(Data(buffer[..<count]))
      tail.take(buffer[..<count])
    }
  }

  /// An inotify descriptor watching the event log at `path` for appends; nil where the
  /// user has no inotify instance or watch left (`events --follow` then polls).
  private static func watchAppends(_ path: String) -> Int32? {
    let fd: Int32
    do { fd = try Inotify.open() } catch { return nil }  // none left: polled instead
    do throws(Errno) { try Inotify.watchWrites(fd, path: path) } catch {
      Sys.close(fd)
      return nil
    }
    return fd
  }
}

/// The event logs of a mountpoint, for `events` and `report`: a live mount's (in its
/// owner's runtime directory; its current log named by its daemon), or, once unmounted,
/// the caller's own logs of that mountpoint.
struct MountLogs {
  /// Where the logs are.
  var directory: EventLogDirectory
  /// The live mount's id (nil when not mounted).
  var current: String?
  /// The resolved mountpoint while mounted.
  var mountpoint: String?

  /// Finds the logs of `path`.
  /// - Parameter needsCurrent: a live mount is required (no mount id was asked for).
  static func find(_ path: String, needsCurrent: Bool) throws(CLIError) -> MountLogs {
    do {
      let target = try ControlClient.target(path)
      return MountLogs(
        directory: EventLogDirectory(target), current: try EventLogDirectory.currentID(of: target),
        mountpoint: target.mountpoint)
    } catch {
      // Not (or no longer) an AppBox mount: the caller's own logs of that mountpoint.
      guard error.code == .busy else { throw error }
      let resolved: String
      do { resolved = try Sys.realpath(path) } catch { throw CLIError(.noInput, "\(path): \(error)") }
      let directory = EventLogDirectory(try RuntimeDirectory.current().files(for: resolved), owner: Sys.effectiveUID)
      guard !needsCurrent else {
        throw CLIError(
          error.code, error.message + "; the logs of its earlier mounts: appbox events --list \(resolved)")
      }
      return MountLogs(directory: directory, current: nil, mountpoint: nil)
    }
  }
}
