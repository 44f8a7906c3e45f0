/// A schedule of capacities over time for `appbox pressure` (a quota experiment: other
/// apps filling and freeing the device while a program runs).
///
/// The text format, one step per line:
///
/// ```
/// # comment lines and blank lines are ignored
/// 0s     100%     # TIME CAPACITY: at TIME after the start, set the capacity
/// 10s    64M      # a size (binary units, at least 1M)
/// 1m30s  50%      # or a percentage of the mount's capacity at the start
/// ```
///
/// TIME is a duration (``DurationText``: `0`, `10s`, `1m30s`, `250ms`), counted from the
/// start of the schedule; times never go backwards. A `#` starts a comment anywhere.
public struct PressureSchedule: Hashable, Sendable {
  /// A capacity as written: a size, or a percentage of the capacity at the start.
  public enum Capacity: Hashable, Sendable {
    /// An absolute capacity in bytes.
    case bytes(Int64)
    /// A share of the mount's capacity when the schedule starts.
    case percent(Percentage)

    /// The capacity in bytes, given the capacity at the start.
    /// - Parameter start: The mount's capacity when the schedule starts.
    public func bytes(start: Int64) -> Int64 {
      switch self {
      case .bytes(let bytes): bytes
      case .percent(let percent): percent.of(start)
      }
    }
  }

  /// One change of capacity.
  public struct Step: Hashable, Sendable {
    /// Seconds from the start of the schedule.
    public var time: Double
    /// The capacity from then on.
    public var capacity: Capacity
    /// The step's line in the schedule's text (from 1), for messages.
    public var line: Int
  }

  /// Why a schedule's text is not a schedule; each case names the line (from 1).
  public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A line does not have exactly two fields, TIME and CAPACITY.
    case fields(line: Int, text: String)
    /// TIME is not a duration.
    case time(line: Int, DurationText.ParseError)
    /// A time earlier than the step before it.
    case backwards(line: Int, text: String)
    /// CAPACITY is neither a size nor a percentage.
    case capacity(line: Int, text: String, reason: String)
    /// A capacity below the minimum.
    case tooSmall(line: Int, text: String, minimum: Int64)
    /// No steps at all.
    case empty

    /// A message that says where and what is wrong, and what to write instead.
    public var description: String {
      switch self {
      case .fields(let line, let text):
        return "line \(line): '\(text)': write TIME CAPACITY, e.g. '10s 64M' or '1m30s 50%'"
      case .time(let line, let error):
        return "line \(line): \(error)"
      case .backwards(let line, let text):
        return "line \(line): time \(text) is earlier than the step before it; list steps in time order"
      case .capacity(let line, let text, let reason):
        return "line \(line): capacity '\(text)': \(reason) (write a size such as 64M or a percentage such as 50%)"
      case .tooSmall(let line, let text, let minimum):
        return "line \(line): capacity '\(text)' is below the minimum of \(ByteCount(minimum).formatted)"
      case .empty:
        return "the schedule has no steps: write one 'TIME CAPACITY' line per change, e.g. '0s 100%'"
      }
    }
  }

  /// The steps, in time order.
  public var steps: [Step]

  /// Parses a schedule.
  /// - Parameters:
  ///   - text: The schedule's text.
  ///   - minimumCapacity: The smallest absolute capacity a line may give.
  /// - Throws: ``ParseError`` naming the first bad line.
  public static func parse(_ text: String, minimumCapacity: Int64) throws(ParseError) -> PressureSchedule {
    var steps: [Step] = []
    for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
      let line = index + 1
      let content = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
      let fields = content.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
      if fields.isEmpty { continue }
      guard fields.count == 2 else { throw .fields(line: line, text: TextScanner.trimmed(String(content))) }
      let timeText = String(fields[0])
      let capacityText = String(fields[1])
      let time: Double
      do { time = try DurationText.parse(timeText) } catch { throw .time(line: line, error) }
      if let previous = steps.last, time < previous.time { throw .backwards(line: line, text: timeText) }
      let capacity: Capacity
      if capacityText.hasSuffix("%") {
        do { capacity = .percent(try Percentage.parse(capacityText)) } catch {
          throw .capacity(line: line, text: capacityText, reason: error.description)
        }
      } else {
        let bytes: Int64
        do { bytes = try ByteCount.parse(capacityText).bytes } catch {
          throw .capacity(line: line, text: capacityText, reason: error.description)
        }
        guard bytes >= minimumCapacity else {
          throw .tooSmall(line: line, text: capacityText, minimum: minimumCapacity)
        }
        capacity = .bytes(bytes)
      }
      steps.append(Step(time: time, capacity: capacity, line: line))
    }
    guard !steps.isEmpty else { throw .empty }
    return PressureSchedule(steps: steps)
  }

  /// Every step's capacity in bytes for a mount whose capacity is `start` now.
  /// - Throws: ``ParseError/tooSmall(line:text:minimum:)`` for a percentage that comes
  ///   out below the minimum.
  public func capacities(start: Int64, minimumCapacity: Int64) throws(ParseError) -> [Int64] {
    var result: [Int64] = []
    for step in steps {
      let bytes = step.capacity.bytes(start: start)
      guard bytes >= minimumCapacity else {
        let text: String
        if case .percent(let percent) = step.capacity { text = percent.description } else { text = String(bytes) }
        throw .tooSmall(line: step.line, text: text, minimum: minimumCapacity)
      }
      result.append(bytes)
    }
    return result
  }
}
