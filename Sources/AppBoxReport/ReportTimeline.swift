import AppBoxEvents

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
  /// Data Protection refusals (value: how many the event stands for, 1 unless coalesced).
  public var refusals: [Point] = []
  /// Re-creations and missed lookups of purged names (value: the bytes when purged).
  public var costs: [Point] = []
  /// Capacity changes (value: the new capacity).
  public var capacityChanges: [Point] = []
  /// The lock states, end to end (empty when the log names none).
  public var states: [Segment] = []

  /// Takes the series from `events` (in time order).
  public init(_ events: [AppBoxEvent]) {
    let events = events.filter { !$0.isLogStructure }
    guard let start = events.first?.time, let end = events.last?.time else { return }
    duration = end - start
    var lastNoSpace = 0
    var state: (name: String, since: Double)?
    for event in events {
      let time = event.time - start
      switch event {
      case .usage(let usage):
        used.append(Point(time: time, value: Double(usage.sample.used)))
        capacity.append(Point(time: time, value: Double(usage.sample.capacity)))
        if usage.sample.noSpace > lastNoSpace {
          noSpace.append(Point(time: time, value: Double(usage.sample.noSpace) - Double(lastNoSpace)))
        }
        lastNoSpace = max(lastNoSpace, usage.sample.noSpace)
        if state == nil { state = (usage.state.name, time) }
      case .capacity(let change):
        if capacity.isEmpty { capacity.append(Point(time: time, value: Double(change.from))) }
        capacity.append(Point(time: time, value: Double(change.to)))
        capacityChanges.append(Point(time: time, value: Double(change.to)))
      case .purge(let purge):
        purges.append(Point(time: time, value: Double(purge.bytes)))
      case .purgeCost(let cost):
        costs.append(Point(time: time, value: Double(cost.purgedBytes)))
      case .refusal(let refusal):
        refusals.append(Point(time: time, value: Double(refusal.count)))
      case .state(let change):
        let current = state ?? (change.from.name, 0)
        if time > current.since { states.append(Segment(start: current.since, end: time, state: current.name)) }
        state = (change.to.name, time)
      case .log, .rotate, .unreadableClass, .containerUsage, .confinement:
        break
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
      let position = (point.time / span * Double(count)).rounded(.down)
      let bin = position.isNaN ? 0 : Int(min(Double(count - 1), max(0, position)))
      sums[bin] += point.value
      counts[bin] += 1
    }
    return (0..<count).filter { counts[$0] > 0 }.map {
      (span * (Double($0) + 0.5) / Double(count), sums[$0], counts[$0])
    }
  }
}
