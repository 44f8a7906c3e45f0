/// Builds XHTML-compatible markup (it parses as XML and as HTML): every element closed,
/// every text and attribute value escaped.
public enum Markup {
  /// `text` made safe as element content or an attribute value: `&`, `<`, `>`, `"`, `'`
  /// escaped, and the characters XML 1.0 forbids (controls other than tab, line feed,
  /// carriage return; lone surrogates cannot occur in a Swift string; U+FFFE, U+FFFF)
  /// replaced by U+FFFD.
  public static func escaped(_ text: String) -> String {
    var result = ""
    result.reserveCapacity(text.utf8.count)
    for scalar in text.unicodeScalars {
      switch scalar {
      case "&": result += "&amp;"
      case "<": result += "&lt;"
      case ">": result += "&gt;"
      case "\"": result += "&quot;"
      case "'": result += "&#39;"
      case "\t", "\n", "\r": result.unicodeScalars.append(scalar)
      default:
        if scalar.value < 0x20 || scalar.value == 0x7F || scalar.value == 0xFFFE || scalar.value == 0xFFFF {
          result += "\u{FFFD}"
        } else {
          result.unicodeScalars.append(scalar)
        }
      }
    }
    return result
  }

  /// An element with attributes (in the order given) and raw inner markup; empty inner
  /// markup gives a self-closed element (`<rect …/>`).
  public static func element(_ name: String, _ attributes: [(String, String)] = [], _ inner: String = "") -> String {
    let attributeText = attributes.map { " \($0.0)=\"\(escaped($0.1))\"" }.joined()
    return inner.isEmpty ? "<\(name)\(attributeText)/>" : "<\(name)\(attributeText)>\(inner)</\(name)>"
  }

  /// An element whose content is `text`, escaped.
  public static func text(_ name: String, _ attributes: [(String, String)] = [], _ text: String) -> String {
    let attributeText = attributes.map { " \($0.0)=\"\(escaped($0.1))\"" }.joined()
    return "<\(name)\(attributeText)>\(escaped(text))</\(name)>"
  }

  /// A number for an attribute: at most two decimals, no exponent.
  public static func number(_ value: Double) -> String {
    guard value.isFinite else { return "0" }
    return Statistics.rounded(value, digits: 2)
  }

  /// The page around `body`: a self-contained XHTML-compatible document (no scripts, no
  /// network), with a small inline stylesheet.
  public static func page(title: String, body: String) -> String {
    """
    <!DOCTYPE html>
    <html xmlns="http://www.w3.org/1999/xhtml" lang="en">
    <head>
    <meta charset="utf-8"/>
    <meta name="viewport" content="width=device-width, initial-scale=1"/>
    <title>\(escaped(title))</title>
    <style>
    body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 760px; color: #222; }
    h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
    table { border-collapse: collapse; margin: 0.5em 0; }
    td, th { padding: 2px 10px; border-bottom: 1px solid #ddd; text-align: left; }
    td.number, th.number { text-align: right; font-variant-numeric: tabular-nums; }
    svg.chart { display: block; margin: 0.5em 0; background: #fcfcfc; border: 1px solid #e4e4e4; }
    svg text { font: 11px system-ui, sans-serif; fill: #333; }
    p.note { color: #555; font-size: 0.9em; }
    </style>
    </head>
    <body>
    \(body)
    </body>
    </html>

    """
  }
}
