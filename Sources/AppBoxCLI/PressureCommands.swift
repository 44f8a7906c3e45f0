import Foundation
import Posix
import SandboxPolicy

/// `appbox resize` and `appbox pressure`: change a live mount's capacity, once or on a
/// schedule (quota experiments).
enum PressureCommands {
  /// The longest schedule file read.
  static let maximumScheduleBytes = 1 << 20

  /// `appbox resize MOUNTPOINT --capacity SIZE`.
  static func resize(_ arguments: [String]) throws(CLIError) -> ExitCode {
    let usage = "usage: appbox resize MOUNTPOINT --capacity SIZE"
    let (mountpoint, text) = try mountpointAndValue(arguments, flag: "--capacity", usage: usage)
    let capacity = try checkedCapacity(text)
    let reply = try send(capacity, reason: .resize, to: try ControlClient.target(mountpoint))
    print(reply)
    return .success
  }

  /// `appbox pressure MOUNTPOINT --schedule FILE`: plays the schedule from the client
  /// side, one `resize` request per step at its time, and exits after the last step.
  /// Everything is checked before the first step (65 for a bad schedule, with its line).
  static func pressure(_ arguments: [String]) throws(CLIError) -> ExitCode {
    let usage = "usage: appbox pressure MOUNTPOINT --schedule FILE"
    let (mountpoint, file) = try mountpointAndValue(arguments, flag: "--schedule", usage: usage)
    let bytes: [UInt8]
    do { bytes = try Sys.readFile(file) } catch {
      throw CLIError(.noInput, "cannot read the schedule \(file): \(error)")
    }
    guard bytes.count <= maximumScheduleBytes else {
      throw CLIError(
        .badValue, "\(file): longer than \(ByteCount(Int64(maximumScheduleBytes)).formatted); is it a schedule?")
    }
    let schedule: PressureSchedule
    do {
      schedule = try PressureSchedule.parse(
        String(decoding: bytes, as: UTF8.self), minimumCapacity: MountRequest.minimumCapacity)
    } catch { throw CLIError(.badValue, "\(file): \(error)") }
    let target = try ControlClient.target(mountpoint)
    let status = ControlClient.object(try ControlClient.send("status", to: target))["status"] as? [String: Any]
    guard let start = (status?["capacity"] as? NSNumber)?.int64Value else {
      throw CLIError(.failure, "the daemon of \(mountpoint) did not report its capacity")
    }
    let capacities: [Int64]
    do { capacities = try schedule.capacities(start: start, minimumCapacity: MountRequest.minimumCapacity) } catch {
      throw CLIError(.badValue, "\(file): \(error)")
    }
    // Ctrl-C (or SIGTERM) stops the schedule between steps, whoever started it.
    do { try TerminationSignals.unblock() } catch { throw CLIError(.osError, "cannot unblock SIGINT: \(error)") }
    let begin = Clock.monotonic()
    for (step, capacity) in zip(schedule.steps, capacities) {
      let wait = begin + step.time - Clock.monotonic()
      if wait > 0 { Clock.sleep(seconds: wait) }
      let line = try send(capacity, reason: .schedule, to: target)
      // Unbuffered, so a reader of a pipe sees each step as it happens.
      FileHandle.standardOutput.write(Data((String(format: "%7.1fs  ", Clock.monotonic() - begin) + line + "\n").utf8))
    }
    return .success
  }

  /// A capacity option's value, checked as `--capacity` is at mount.
  static func checkedCapacity(_ text: String, option: String = "--capacity") throws(CLIError) -> Int64 {
    let capacity: Int64
    do { capacity = try ByteCount.parse(text).bytes } catch {
      throw CLIError(.badValue, "\(option) \(text): \(error) (use e.g. 500M or 2G)")
    }
    guard capacity >= MountRequest.minimumCapacity else {
      throw CLIError(
        .badValue,
        "\(option) \(text): too small, the minimum is \(ByteCount(MountRequest.minimumCapacity).formatted) (1M)")
    }
    return capacity
  }

  /// Sends one `resize` and describes what it did.
  private static func send(_ capacity: Int64, reason: CapacityChangeReason, to target: ControlClient.Target)
    throws(CLIError) -> String
  {
    // Shrinking purges before the reply: as long as its unlinks, no timeout.
    let reply = ControlClient.object(
      try ControlClient.send("resize \(capacity) \(reason.rawValue)", to: target, timeoutSeconds: nil))
    func number(_ key: String) -> Int64 { (reply[key] as? NSNumber)?.int64Value ?? 0 }
    let files = number("files")
    let (to, used) = (number("to"), number("used"))
    return "capacity \(ByteCount(number("from")).formatted) → \(ByteCount(to).formatted)"
      + (files > 0 ? ", purged \(files) file\(files == 1 ? "" : "s") (\(ByteCount(number("bytes")).formatted))" : "")
      + ", used \(ByteCount(used).formatted)"
      + (used > to ? " (the rest cannot be purged now: allocations get ENOSPC until usage is below the capacity)" : "")
  }

  /// The mountpoint and the value of `flag`, each exactly once.
  private static func mountpointAndValue(_ arguments: [String], flag: String, usage: String) throws(CLIError) -> (
    String, String
  ) {
    guard let index = arguments.firstIndex(of: flag) else {
      if arguments.contains("--help") || arguments.contains("-h") { throw CLIError(.success, usage) }
      throw CLIError(.usage, "\(flag) is missing")
    }
    guard index + 1 < arguments.count else { throw CLIError(.usage, "\(flag) needs a value") }
    var rest = arguments
    let value = rest[index + 1]
    rest.removeSubrange(index...(index + 1))
    return (try ControlCommands.single(rest, usage: usage), value)
  }
}
