/// The event log's format: JSON Lines, one event a line, each an object whose first member
/// is `"type"` (docs/reference.md, "Events"). Every event type is a `Codable` type of this
/// module, written by the daemon with ``JSONLineEncoder`` and read back by the report, the
/// experiments and AppBoxKit with ``JSONLineDecoder``: one schema for both sides.
///
/// Each segment of a log starts with a ``LogHeader`` (`"type":"log"`) that names the
/// format's ``version``. Readers treat what they do not know as follows:
/// - an unknown `type`: the line is skipped and counted (a newer daemon's new event);
/// - an unknown member of a known type: ignored (a newer daemon's new optional field);
/// - a header whose version is above ``version``: the log is not read (the report refuses
///   it with a message; AppBoxKit falls back to polling), because the version changes only
///   when a field is removed, renamed, retyped or given a new meaning or value;
/// - no header at all (a log written before headers existed): version 1, which is the
///   same format.
public enum EventLogFormat {
  /// The version this module writes and reads.
  public static let version = 1

  /// Where the previous segment of the log whose current segment is at `path` is kept:
  /// `ID.jsonl` → `ID.1.jsonl` (any other name gets `.1` appended).
  public static func previousSegmentPath(of path: String) -> String {
    path.hasSuffix(".jsonl") ? String(path.dropLast(".jsonl".count)) + ".1.jsonl" : path + ".1"
  }
}

/// Seconds as events carry them (times since the Unix epoch, and durations): JSON numbers
/// within ±``limit`` (about 31,700 years). The daemon clamps what it writes into that
/// range, so every line it writes reads back; readers refuse a line outside it, so no
/// report does arithmetic on 1e308.
public enum EventSeconds {
  /// The largest magnitude accepted.
  public static let limit = 1e12

  /// `value` within the range (NaN: 0).
  public static func clamped(_ value: Double) -> Double {
    guard !value.isNaN else { return 0 }
    return min(max(value, -limit), limit)
  }

  /// Whether `value` is within the range.
  public static func isValid(_ value: Double) -> Bool { value.isFinite && abs(value) <= limit }
}
