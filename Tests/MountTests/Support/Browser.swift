import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

extension Trait where Self == ConditionTrait {
  /// Needs Debian's `chromium` (scripts/install-deps.sh installs it; never skipped in CI).
  static var needsBrowser: Self {
    .enabled(if: Browser.path != nil || ProcessInfo.processInfo.environment["CI"] != nil, "needs chromium")
  }
}

/// Opens pages in headless Chromium and reports what it laid out.
enum Browser {
  /// The browser binary, if installed.
  static let path: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { access($0, X_OK) == 0 }

  /// What Chromium laid out in a page.
  struct Layout: Decodable {
    /// Every `svg` element: its id, rendered size, and how many marks (rects, circles,
    /// polylines) inside it have a non-zero box.
    struct Chart: Decodable {
      let id: String
      let width: Double
      let height: Double
      let visibleMarks: Int
    }

    /// One element with an id: its rendered box.
    struct Box: Decodable {
      let width: Double
      let height: Double
    }

    let charts: [Chart]
    let boxes: [String: Box]
    /// Each `td[data-key]`: its `data-value` (or its text when it has none).
    let cells: [String: [String]]
    let scripts: Int
  }

  /// Loads a copy of `page` (with a measuring script added at the end of the body, so the
  /// page itself needs none) in headless Chromium, and returns its layout.
  static func layout(of page: String, in directory: String) throws -> Layout {
    let binary = try #require(path, "chromium is not installed: run scripts/install-deps.sh")
    let original = try String(contentsOfFile: page, encoding: .utf8)
    let probe = """
      <script>
      (function () {
        const box = e => e.getBoundingClientRect();
        const charts = [...document.querySelectorAll('svg')].map(svg => ({
          id: svg.id, width: box(svg).width, height: box(svg).height,
          visibleMarks: [...svg.querySelectorAll('rect, circle, polyline')]
            .filter(e => box(e).width > 0 && box(e).height > 0).length }));
        const boxes = {};
        for (const e of document.querySelectorAll('[id]')) boxes[e.id] = { width: box(e).width, height: box(e).height };
        const cells = {};
        for (const td of document.querySelectorAll('td[data-key]')) {
          (cells[td.dataset.key] = cells[td.dataset.key] || []).push(td.dataset.value ?? td.textContent);
        }
        const scripts = document.querySelectorAll('script').length - 1;
        const pre = document.createElement('pre');
        pre.id = 'layout';
        pre.textContent = btoa(JSON.stringify({ charts, boxes, cells, scripts }));
        document.body.appendChild(pre);
      })();
      </script>
      """
    let probed = directory + "/probed.html"
    try original.replacingOccurrences(of: "</body>", with: probe + "</body>").write(
      toFile: probed, atomically: true, encoding: .utf8)
    let profile = directory + "/chromium-profile"
    let result = try Command.run(
      binary,
      [
        "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile)",
        "--window-size=900,2000", "--dump-dom", "file://" + probed,
      ])
    try #require(result.status == 0, "chromium exited \(result.status): \(result.error.suffix(2000))")
    let dom = result.output
    let start = try #require(dom.range(of: "<pre id=\"layout\">"), "no layout in the DOM: \(dom.suffix(2000))")
    let end = try #require(dom.range(of: "</pre>", range: start.upperBound..<dom.endIndex))
    let encoded = String(dom[start.upperBound..<end.lowerBound])
    let json = try #require(Data(base64Encoded: encoded), "not base64: \(encoded.prefix(200))")
    return try JSONDecoder().decode(Layout.self, from: json)
  }

  /// Parses `page` as XML with python3's parser (no browser): nil when well-formed, else
  /// the parser's message. `python3 -c` prints each `td[data-key]`'s value as JSON.
  static func xmlCells(of page: String) throws -> (error: String?, cells: [String: [String]]) {
    let script = """
      import json, sys, xml.etree.ElementTree as ET
      try:
          root = ET.parse(sys.argv[1]).getroot()
      except ET.ParseError as e:
          print(json.dumps({"error": str(e)})); sys.exit(0)
      cells = {}
      for td in root.iter("{http://www.w3.org/1999/xhtml}td"):
          if "data-key" in td.attrib:
              cells.setdefault(td.attrib["data-key"], []).append(td.attrib.get("data-value", "".join(td.itertext())))
      print(json.dumps({"cells": cells}))
      """
    let result = try Command.run("python3", ["-c", script, page])
    let object = try #require(
      (try? JSONSerialization.jsonObject(with: Data(result.output.utf8))) as? [String: Any], "\(result.error)")
    return (object["error"] as? String, object["cells"] as? [String: [String]] ?? [:])
  }
}
