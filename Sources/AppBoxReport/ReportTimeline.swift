/// The series a report draws over time, taken from an event log. Times are seconds
/// from the first event.
public struct ReportTimeline: Sendable, Hashable {
  /// A value at a time.
  public struct Point: Sendable, Hashable {
    public var time: Double
    public var value: Double
  }

  /// A span of one lock state.
  public struct Segment: Sendable, Hashable {
    public var start: Double
    public var end: Double
    public var state: String
  }

  /// Seconds from the first event to the last.
  public var duration: Double = 0
  /// Used bytes at each usage sample.
  public var used: [Point] = []
  /// The capacity: at each usage sample and each change.
  public var capacity: [Point] = []
  /// Each purge: its time and bytes.
  public var purges: [Point] = []
  /// ENOSPC refusals counted between two samples, at the later one (value: how many).
  public var noSpace: [Point] = []
  /// Data Protection refusals (value 1 each).
  public var refusals: [Point] = []
  /// Re-creations and missed lookups of purged names (value: the bytes when purged).
  public var costs: [Point] = []
  /// Capacity changes (value: the new capacity).
  public var capacityChanges: [Point] = []
  /// The lock states, end to end (empty when the log names none).
  public var states: [Segment] = []

  /// Takes the series from `events` (in time order).
  public init(_ events: [ReportEvent]) {
    guard let start = events.first?.time, let end = events.last?.time else { return }
    duration = end - start
    var lastNoSpace = 0
    var state: (name: String, since: Double)?
    for event in events {
      let time = event.time - start
      switch event {
      case .usage(let usage):
        used.append(Point(time: time, value: Double(usage.used)))
        capacity.append(Point(time: time, value: Double(usage.capacity)))
        if usage.noSpace > lastNoSpace { noSpace.append(Point(time: time, value: Double(usage.noSpace - lastNoSpace))) }
        lastNoSpace = max(lastNoSpace, usage.noSpace)
        if state == nil, let name = usage.state { state = (name, time) }
      case .capacity(_, let from, let to, _):
        if capacity.isEmpty { capacity.append(Point(time: time, value: Double(from))) }
        capacity.append(Point(time: time, value: Double(to)))
        capacityChanges.append(Point(time: time, value: Double(to)))
      case .purge(let purge):
        purges.append(Point(time: time, value: Double(purge.bytes)))
      case .cost(let cost):
        costs.append(Point(time: time, value: Double(cost.purgedBytes)))
      case .refusal:
        refusals.append(Point(time: time, value: 1))
      case .state(_, let from, let to):
        let current = state ?? (from, 0)
        if time > current.since { states.append(Segment(start: current.since, end: time, state: current.name)) }
        state = (to, time)
      }
    }
    if let state, duration >= state.since {
      states.append(Segment(start: state.since, end: max(duration, state.since), state: state.name))
    }
  }

  /// `points` summed into `count` equal bins over the duration (for marks that stay few
  /// however long the log): each nonempty bin's middle time, its sum and its count.
  public func binned(_ points: [Point], count: Int) -> [(time: Double, sum: Double, count: Int)] {
    guard count > 0, !points.isEmpty else { return [] }
    let span = max(duration, 1e-9)
    var sums = [Double](repeating: 0, count: count)
    var counts = [Int](repeating: 0, count: count)
    for point in points {
      let bin = min(count - 1, max(0, Int(point.time / span * Double(count))))
      sums[bin] += point.value
      counts[bin] += 1
    }
    return (0..<count).filter { counts[$0] > 0 }.map {
      (span * (Double($0) + 0.5) / Double(count), sums[$0], counts[$0])
    }
  }
}
