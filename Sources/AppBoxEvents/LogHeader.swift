/// The first line of each segment of a mount's event log (`"type":"log"`): the format's
/// version, the mount's id, the segment's number and how many of the mount's events came
/// before it (so a reader knows what it lacks when earlier segments are gone).
public struct LogHeader: Sendable, Hashable, Codable {
  /// The format's version (``EventLogFormat/version`` when this module wrote it).
  public var version: Int
  /// The mount's id (``MountLogID``).
  public var mount: String
  /// When the segment was started, in seconds since the Unix epoch.
  public var time: Double
  /// The segment's number: 0 for the mount's first, one more at each rotation.
  public var segment: Int
  /// The mount's events written before this segment (in earlier segments, which
  /// rotation deletes but the previous one).
  public var eventsBefore: Int

  /// Creates a header.
  public init(
    version: Int = EventLogFormat.version, mount: String, time: Double, segment: Int = 0, eventsBefore: Int = 0
  ) {
    self.version = version
    self.mount = mount
    self.time = time
    self.segment = segment
    self.eventsBefore = eventsBefore
  }

  enum CodingKeys: String, CodingKey { case type, version, mount, time, segment, eventsBefore }

  /// Writes e.g. `{"type":"log","version":1,"mount":"20260115-103012-3fa9",`
  /// `"time":1768473012.5,"segment":0}`; `eventsBefore` follows in later segments.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("log", forKey: .type)
    try container.encode(version, forKey: .version)
    try container.encode(mount, forKey: .mount)
    try container.encodeSeconds(time, forKey: .time)
    try container.encode(segment, forKey: .segment)
    if eventsBefore != 0 { try container.encode(eventsBefore, forKey: .eventsBefore) }
  }

  /// Reads a header. Only `version` is read from a header of a newer version (its other
  /// members may have changed); readers check ``version`` before anything else.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    version = try container.decode(Int.self, forKey: .version)
    guard version <= EventLogFormat.version else {
      mount = ""
      time = 0
      segment = 0
      eventsBefore = 0
      return
    }
    mount = try container.decode(String.self, forKey: .mount)
    time = try container.decodeSeconds(forKey: .time)
    segment = try container.decode(Int.self, forKey: .segment)
    eventsBefore = try container.decodeIfPresent(Int.self, forKey: .eventsBefore) ?? 0
  }
}

/// The last line of a segment that rotation closed (`"type":"rotate"`): the log goes on
/// in a new segment at the same path. It wakes those who follow the file (they then open
/// the path again and read the new segment from its header).
public struct LogRotation: Sendable, Hashable, Codable {
  /// The mount's id.
  public var mount: String
  /// When the log was rotated, in seconds since the Unix epoch.
  public var time: Double
  /// The number of the segment that follows.
  public var nextSegment: Int

  /// Creates a rotation mark.
  public init(mount: String, time: Double, nextSegment: Int) {
    self.mount = mount
    self.time = time
    self.nextSegment = nextSegment
  }

  enum CodingKeys: String, CodingKey { case type, time, mount, nextSegment }

  /// Writes e.g. `{"type":"rotate","time":1768473099.0,"mount":"20260115-103012-3fa9",`
  /// `"nextSegment":1}`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("rotate", forKey: .type)
    try container.encodeSeconds(time, forKey: .time)
    try container.encode(mount, forKey: .mount)
    try container.encode(nextSegment, forKey: .nextSegment)
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    time = try container.decodeSeconds(forKey: .time)
    mount = try container.decode(String.self, forKey: .mount)
    nextSegment = try container.decode(Int.self, forKey: .nextSegment)
  }
}
