import AppBoxEvents

/// Reads an event log for a report or an experiment, with the one schema
/// (``AppBoxEvent``, ``EventLogReader``): the daemon's own lines always read back, and no
/// line can crash the report (what cannot be represented is refused and counted).
public enum EventLogParser {
  /// What a log held.
  public struct Parsed: Sendable {
    /// The mount's events (not the log's headers or rotation marks), in time order (ties
    /// keep the log's order).
    public var events: [AppBoxEvent]
    /// Lines that were not JSON objects, or a known type with a bad or missing member.
    public var malformedLines: Int
    /// Lines of types this version does not know, skipped, by type.
    public var skippedTypes: [String: Int]
    /// The mounts the log's headers name, in order (several: a log saved across mounts).
    public var mounts: [String]
    /// Events that rotation dropped before the log's first segment (see
    /// ``EventLogReader/droppedEvents``).
    public var droppedEvents: Int
    /// A header's format version above the one this report reads, if any: then nothing
    /// after it was read.
    public var newerVersion: Int?

    /// Lines of unknown types, skipped.
    public var skippedLines: Int { skippedTypes.values.reduce(0, +) }

    /// What was left out, for people (empty when nothing was).
    public var notes: [String] {
      var notes: [String] = []
      if malformedLines > 0 {
        notes.append("\(malformedLines) malformed line\(malformedLines == 1 ? "" : "s") skipped")
      }
      if skippedLines > 0 {
        let types = skippedTypes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        notes.append("\(skippedLines) line\(skippedLines == 1 ? "" : "s") of unknown types skipped (\(types))")
      }
      if droppedEvents > 0 {
        notes.append(
          "\(droppedEvents) earlier event\(droppedEvents == 1 ? "" : "s") no longer in the log (rotated away; "
            + "appbox status counts them all)")
      }
      if mounts.count > 1 { notes.append("the log holds \(mounts.count) mounts: \(mounts.joined(separator: ", "))") }
      return notes
    }
  }

  /// Parses a whole log. Blank lines are ignored; a log cut in the middle of its last line
  /// counts that line as malformed.
  public static func parse(_ bytes: some Collection<UInt8>) -> Parsed {
    var reader = EventLogReader()
    reader.read(bytes)
    return Parsed(
      events: reader.eventsInTimeOrder, malformedLines: reader.malformedLines, skippedTypes: reader.skippedTypes,
      mounts: reader.mounts, droppedEvents: reader.droppedEvents, newerVersion: reader.newerVersion)
  }

  /// Parses a whole log given as text.
  public static func parse(_ text: String) -> Parsed { parse(Array(text.utf8)) }
}
