import SandboxPolicy

/// Inline SVG charts (no script, no stylesheet needed: sizes, colours and strokes are
/// attributes). Every chart has an `id`, a `<title>`, and marks whose `data-*`
/// attributes carry the exact numbers drawn.
public enum SVGChart {
  /// The drawing area inside a chart's margins, and the mapping from data to pixels.
  struct Frame {
    var width = 720.0
    var height = 240.0
    var left = 72.0
    var right = 32.0
    var top = 16.0
    var bottom = 36.0
    var xRange: ClosedRange<Double> = 0...1
    var yRange: ClosedRange<Double> = 0...1

    func x(_ value: Double) -> Double {
      let span = xRange.upperBound - xRange.lowerBound
      return left + (span > 0 ? (value - xRange.lowerBound) / span : 0.5) * (width - left - right)
    }

    func y(_ value: Double) -> Double {
      let span = yRange.upperBound - yRange.lowerBound
      return height - bottom - (span > 0 ? (value - yRange.lowerBound) / span : 0) * (height - top - bottom)
    }
  }

  /// A series drawn as a line.
  public struct Series: Sendable {
    public var id: String
    public var name: String
    public var color: String
    public var points: [(x: Double, y: Double)]
    /// Steps (the value holds until the next point) instead of straight segments.
    public var stepped: Bool
    /// Dashes, e.g. `6 3`, or nil.
    public var dash: String?
    /// Draws a dot with a `<title>` at each point.
    public var dots: Bool

    public init(
      id: String, name: String, color: String, points: [(x: Double, y: Double)], stepped: Bool = false,
      dash: String? = nil, dots: Bool = false
    ) {
      self.id = id
      self.name = name
      self.color = color
      self.points = points
      self.stepped = stepped
      self.dash = dash
      self.dots = dots
    }
  }

  /// A mark at one x: a short vertical line at the bottom of the plot.
  public struct Mark: Sendable {
    public var x: Double
    public var title: String
    public var attributes: [(String, String)]

    public init(x: Double, title: String, attributes: [(String, String)]) {
      self.x = x
      self.title = title
      self.attributes = attributes
    }
  }

  /// One bar of a bar chart.
  public struct Bar: Sendable {
    public var label: String
    public var value: Double
    public var text: String
    public var color: String
    public var key: String

    public init(label: String, value: Double, text: String, color: String, key: String) {
      self.label = label
      self.value = value
      self.text = text
      self.color = color
      self.key = key
    }
  }

  /// A line chart with axes, a legend, and optional marks (one class of marks per list).
  /// - Parameters:
  ///   - id: The `svg` element's id.
  ///   - title: What the chart shows (its `<title>`).
  ///   - series: The lines.
  ///   - marks: Rows of marks under the lines: a class name, a colour, the marks.
  ///   - xLabel: The x axis's caption; `xText`, `yText` format the tick labels.
  ///   - logX: A logarithmic x axis (base 2), for capacities.
  public static func lineChart(
    id: String, title: String, series: [Series], marks: [(kind: String, color: String, marks: [Mark])] = [],
    xLabel: String, xText: (Double) -> String, yText: (Double) -> String, xDomain: ClosedRange<Double>? = nil,
    logX: Bool = false
  ) -> String {
    let transform: (Double) -> Double = logX ? { $0 > 0 ? log2($0) : 0 } : { $0 }
    let xs = series.flatMap { $0.points.map { transform($0.x) } }
    let ys = series.flatMap { $0.points.map(\.y) }
    var frame = Frame()
    frame.top = 28
    frame.height = 256 + Double(marks.count) * 13
    frame.bottom = 42 + Double(marks.count) * 13
    let xDomain = xDomain.map { transform($0.lowerBound)...transform($0.upperBound) }
    frame.xRange = xDomain ?? ((xs.min() ?? 0)...max(xs.max() ?? 1, (xs.min() ?? 0) + (logX ? 1 : 1e-9)))
    frame.yRange = 0...niceCeiling(max(ys.max() ?? 1, 1))
    var body = Markup.text("title", [], title)
    body += axes(frame, xLabel: xLabel, xText: logX ? { xText(exp2($0)) } : xText, yText: yText, logX: logX)
    for line in series where !line.points.isEmpty {
      var path: [(Double, Double)] = []
      for (index, point) in line.points.enumerated() {
        let px = frame.x(transform(point.x))
        if line.stepped, index > 0 { path.append((px, frame.y(line.points[index - 1].y))) }
        path.append((px, frame.y(point.y)))
      }
      if path.count == 1 { path.append((path[0].0 + 1, path[0].1)) }
      var attributes = [
        ("id", line.id), ("class", "series"), ("data-name", line.name), ("fill", "none"), ("stroke", line.color),
        ("stroke-width", "2"),
        ("points", path.map { "\(Markup.number($0.0)),\(Markup.number($0.1))" }.joined(separator: " ")),
      ]
      if let dash = line.dash { attributes.append(("stroke-dasharray", dash)) }
      body += Markup.element("polyline", attributes, Markup.text("title", [], line.name))
      if line.dots {
        for point in line.points {
          body += Markup.element(
            "circle",
            [
              ("class", "point"), ("data-series", line.id), ("data-x", Markup.number(point.x)),
              ("data-y", Markup.number(point.y)), ("cx", Markup.number(frame.x(transform(point.x)))),
              ("cy", Markup.number(frame.y(point.y))), ("r", "4"), ("fill", line.color),
            ], Markup.text("title", [], "\(line.name): \(xText(point.x)), \(yText(point.y))"))
        }
      }
    }
    for (row, markRow) in marks.enumerated() {
      let y = frame.height - frame.bottom + 40 + Double(row) * 13
      body += Markup.text(
        "text", [("x", Markup.number(frame.left - 6)), ("y", Markup.number(y + 8)), ("text-anchor", "end")],
        markRow.kind)
      for mark in markRow.marks {
        let x = frame.x(mark.x)
        body += Markup.element(
          "rect",
          [
            ("class", "mark \(markRow.kind)"), ("x", Markup.number(x - 1.5)), ("y", Markup.number(y)), ("width", "3"),
            ("height", "9"), ("fill", markRow.color),
          ] + mark.attributes,
          Markup.text("title", [], mark.title))
      }
    }
    body += legend(series.map { ($0.name, $0.color) }, frame: frame)
    return svg(id: id, frame: frame, body)
  }

  /// A horizontal bar chart, one bar per row, each with its label and value text.
  public static func barChart(id: String, title: String, bars: [Bar]) -> String {
    let rowHeight = 24.0
    var frame = Frame()
    frame.left = 200
    frame.right = 150
    frame.height = max(1, Double(bars.count)) * rowHeight + 16
    let largest = max(bars.map(\.value).max() ?? 0, 1e-9)
    var body = Markup.text("title", [], title)
    if bars.isEmpty {
      body += Markup.text("text", [("x", "16"), ("y", "24")], "none")
    }
    for (index, bar) in bars.enumerated() {
      let y = 8 + Double(index) * rowHeight
      let width = max(bar.value > 0 ? 1 : 0, bar.value / largest * (frame.width - frame.left - frame.right))
      body += Markup.text(
        "text", [("x", Markup.number(frame.left - 8)), ("y", Markup.number(y + 15)), ("text-anchor", "end")], bar.label)
      body += Markup.element(
        "rect",
        [
          ("class", "bar"), ("data-key", bar.key), ("data-value", Markup.number(bar.value)),
          ("x", Markup.number(frame.left)), ("y", Markup.number(y + 3)), ("width", Markup.number(max(width, 0.5))),
          ("height", "16"), ("fill", bar.color),
        ],
        Markup.text("title", [], "\(bar.label): \(bar.text)"))
      body += Markup.text(
        "text", [("x", Markup.number(frame.left + width + 6)), ("y", Markup.number(y + 15))], bar.text)
    }
    return svg(id: id, frame: frame, body)
  }

  /// Lanes over time: coloured spans in the first lane (e.g. lock states), marks in the
  /// others (refusals, ENOSPC, capacity changes).
  public static func laneChart(
    id: String, title: String, duration: Double,
    spans: (name: String, segments: [(start: Double, end: Double, label: String, color: String)]),
    lanes: [(name: String, color: String, marks: [Mark])]
  ) -> String {
    var frame = Frame()
    frame.left = 110
    frame.height = 36 + Double(lanes.count + 1) * 26 + 20
    frame.xRange = 0...max(duration, 1e-9)
    var body = Markup.text("title", [], title)
    func laneLabel(_ index: Int, _ name: String) {
      body += Markup.text(
        "text",
        [
          ("x", Markup.number(frame.left - 8)), ("y", Markup.number(frame.top + Double(index) * 26 + 15)),
          ("text-anchor", "end"),
        ],
        name)
    }
    laneLabel(0, spans.name)
    for segment in spans.segments {
      let x0 = frame.x(segment.start)
      body += Markup.element(
        "rect",
        [
          ("class", "span"), ("data-label", segment.label), ("data-start", Markup.number(segment.start)),
          ("data-end", Markup.number(segment.end)), ("x", Markup.number(x0)), ("y", Markup.number(frame.top + 2)),
          ("width", Markup.number(max(1, frame.x(segment.end) - x0))), ("height", "18"), ("fill", segment.color),
        ],
        Markup.text(
          "title", [], "\(segment.label): \(Statistics.seconds(segment.start))–\(Statistics.seconds(segment.end))"))
    }
    for (offset, lane) in lanes.enumerated() {
      let index = offset + 1
      laneLabel(index, lane.name)
      let y = frame.top + Double(index) * 26
      body += Markup.element(
        "line",
        [
          ("x1", Markup.number(frame.left)), ("x2", Markup.number(frame.width - frame.right)),
          ("y1", Markup.number(y + 11)), ("y2", Markup.number(y + 11)), ("stroke", "#ddd"),
        ])
      for mark in lane.marks {
        body += Markup.element(
          "rect",
          [
            ("class", "mark"), ("x", Markup.number(frame.x(mark.x) - 1.5)), ("y", Markup.number(y + 2)), ("width", "3"),
            ("height", "18"), ("fill", lane.color),
          ] + mark.attributes,
          Markup.text("title", [], mark.title))
      }
    }
    frame.bottom = 20
    let axisY = frame.top + Double(lanes.count + 1) * 26 + 4
    body += Markup.element(
      "line",
      [
        ("x1", Markup.number(frame.left)), ("x2", Markup.number(frame.width - frame.right)),
        ("y1", Markup.number(axisY)),
        ("y2", Markup.number(axisY)), ("stroke", "#888"),
      ])
    for tick in ticks(frame.xRange, count: 6) {
      body += Markup.text(
        "text", [("x", Markup.number(frame.x(tick))), ("y", Markup.number(axisY + 14)), ("text-anchor", "middle")],
        Statistics.seconds(tick))
    }
    return svg(id: id, frame: frame, body)
  }

  // MARK: - Parts

  static func svg(id: String, frame: Frame, _ body: String) -> String {
    Markup.element(
      "svg",
      [
        ("xmlns", "http://www.w3.org/2000/svg"), ("id", id), ("class", "chart"), ("width", Markup.number(frame.width)),
        ("height", Markup.number(frame.height)),
        ("viewBox", "0 0 \(Markup.number(frame.width)) \(Markup.number(frame.height))"),
        ("role", "img"),
      ], body)
  }

  static func axes(
    _ frame: Frame, xLabel: String, xText: (Double) -> String, yText: (Double) -> String, logX: Bool
  ) -> String {
    var body = ""
    let bottom = frame.y(frame.yRange.lowerBound)
    let yStep = (frame.yRange.upperBound - frame.yRange.lowerBound) / 4
    for tick in (0...4).map({ frame.yRange.lowerBound + Double($0) * yStep }) {
      let y = frame.y(tick)
      body += Markup.element(
        "line",
        [
          ("x1", Markup.number(frame.left)), ("x2", Markup.number(frame.width - frame.right)), ("y1", Markup.number(y)),
          ("y2", Markup.number(y)), ("stroke", tick == frame.yRange.lowerBound ? "#888" : "#eee"),
        ])
      body += Markup.text(
        "text", [("x", Markup.number(frame.left - 6)), ("y", Markup.number(y + 4)), ("text-anchor", "end")], yText(tick)
      )
    }
    let xTicks = logX ? integerTicks(frame.xRange) : ticks(frame.xRange, count: 6)
    for tick in xTicks {
      body += Markup.text(
        "text", [("x", Markup.number(frame.x(tick))), ("y", Markup.number(bottom + 14)), ("text-anchor", "middle")],
        xText(tick))
    }
    body += Markup.text(
      "text",
      [
        ("x", Markup.number((frame.left + frame.width - frame.right) / 2)), ("y", Markup.number(bottom + 28)),
        ("text-anchor", "middle"),
      ], xLabel)
    return body
  }

  static func legend(_ entries: [(String, String)], frame: Frame) -> String {
    var body = ""
    var x = frame.left + 8
    for (name, color) in entries {
      body += Markup.element(
        "rect", [("x", Markup.number(x)), ("y", "8"), ("width", "12"), ("height", "4"), ("fill", color)])
      body += Markup.text("text", [("x", Markup.number(x + 16)), ("y", "14")], name)
      x += 24 + Double(name.count) * 6.5
    }
    return body
  }

  /// About `count` round ticks across `range` (1, 2 or 5 times a power of ten).
  static func ticks(_ range: ClosedRange<Double>, count: Int) -> [Double] {
    let span = range.upperBound - range.lowerBound
    guard span > 0, count > 0 else { return [range.lowerBound] }
    let rough = span / Double(count)
    var step = 1.0
    while step * 10 <= rough { step *= 10 }
    while step > rough { step /= 10 }
    step = [1.0, 2, 5, 10].map { $0 * step }.first { $0 >= rough } ?? step * 10
    let first = (range.lowerBound / step).rounded(.up)
    var result: [Double] = []
    // Counted, not accumulated: a step too small for the range's magnitude cannot loop.
    var index = 0.0
    while result.count <= 4 * count + 2 {
      let value = (first + index) * step
      guard value <= range.upperBound + step * 1e-9 else { break }
      result.append(value)
      index += 1
    }
    return result.isEmpty ? [range.lowerBound] : result
  }

  /// The whole numbers in `range` (powers of two on a log axis).
  static func integerTicks(_ range: ClosedRange<Double>) -> [Double] {
    let low = range.lowerBound.rounded(.up)
    let high = min(range.upperBound.rounded(.down), low + 64)
    return low <= high ? stride(from: low, through: high, by: 1).map { $0 } : [range.lowerBound]
  }

  /// A round top for a y axis at least `value` whose quarters read well, in bytes (a
  /// binary unit times a small factor) as in counts.
  static func niceCeiling(_ value: Double) -> Double {
    guard value.isFinite else { return .greatestFiniteMagnitude }
    var unit = 1.0
    while unit * 1024 <= value { unit *= 1024 }
    for factor in [
      1.0, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32, 40, 50, 64, 80, 100, 128, 160, 200, 256, 320, 400,
      512, 640, 800, 1024,
    ] where factor * unit >= value {
      return factor * unit
    }
    return value
  }
}

#if canImport(Glibc)
  import Glibc
#endif
