/// Reads an event log, line by line: what the report, the experiments and `appbox
/// events --list` make of a log. Nothing a line holds can crash it (see
/// ``JSONObjectScanner``); every line is either an event, the log's structure, a skipped
/// line of an unknown type (counted by type) or a malformed one (counted).
public struct EventLogReader: Sendable {
  /// The mount's events (not headers or rotation marks), in the log's order.
  public private(set) var events: [AppBoxEvent] = []
  /// The segments' headers, in the log's order.
  public private(set) var headers: [LogHeader] = []
  /// Lines that are not JSON objects, or a known type with a member missing, of the
  /// wrong kind or out of range.
  public private(set) var malformedLines = 0
  /// Lines of types this version does not know, skipped, by type.
  public private(set) var skippedTypes: [String: Int] = [:]
  /// The highest format version above ``EventLogFormat/version`` that a header named, if
  /// any: such a log is not read (see ``EventLogFormat``).
  public private(set) var newerVersion: Int?
  /// Lines after a header of a newer version, not interpreted.
  public private(set) var unreadLines = 0
  /// The log's own lines: headers (of any version) and rotation marks.
  public private(set) var structureLines = 0
  private var readingNewer = false

  /// Creates an empty reader.
  public init() {}

  /// Lines of unknown types, skipped.
  public var skippedLines: Int { skippedTypes.values.reduce(0, +) }

  /// The mounts whose segments the log holds, in order of first appearance.
  public var mounts: [String] {
    var seen = Set<String>()
    return headers.map(\.mount).filter { seen.insert($0).inserted }
  }

  /// The mounts' events that came before the earliest segment read of each (rotated
  /// away, or not given to the reader): each header says how many came before it.
  public var droppedEvents: Int {
    var earliest: [String: Int] = [:]
    for header in headers where earliest[header.mount] == nil { earliest[header.mount] = header.eventsBefore }
    return earliest.values.reduce(0) { $0.addingReportingOverflow($1).overflow ? Int.max : $0 + $1 }
  }

  /// The events in time order (ties keep the log's order: the daemon writes from several
  /// threads, so times may be out of order).
  public var eventsInTimeOrder: [AppBoxEvent] {
    events.enumerated().sorted {
      $0.element.time != $1.element.time ? $0.element.time < $1.element.time : $0.offset < $1.offset
    }.map(\.element)
  }

  /// Reads a whole text: lines split at `\n`; blank lines are ignored; a text cut in the
  /// middle of its last line counts that line as malformed.
  public mutating func read(_ text: some Collection<UInt8>) {
    var start = text.startIndex
    while start != text.endIndex {
      let end = text[start...].firstIndex(of: 0x0A) ?? text.endIndex
      read(line: text[start..<end])
      start = end == text.endIndex ? end : text.index(after: end)
    }
  }

  /// Reads one line (without its newline).
  public mutating func read(line: some Collection<UInt8>) {
    if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
    let event: AppBoxEvent
    do { event = try AppBoxEvent.decode(line) } catch {
      if readingNewer {
        unreadLines += 1
        return
      }
      switch error {
      case .unknownType(let type): skippedTypes[type, default: 0] += 1
      case .notJSON, .badField: malformedLines += 1
      }
      return
    }
    if event.isLogStructure { structureLines += 1 }
    if case .log(let header) = event {
      readingNewer = header.version > EventLogFormat.version
      if readingNewer {
        newerVersion = max(newerVersion ?? 0, header.version)
        return
      }
      headers.append(header)
      return
    }
    if readingNewer {
      if !event.isLogStructure { unreadLines += 1 }
      return
    }
    if !event.isLogStructure { events.append(event) }
  }
}
