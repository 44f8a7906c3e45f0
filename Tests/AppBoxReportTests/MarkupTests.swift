import Testing

@testable import AppBoxReport

@Suite("Markup")
struct MarkupTests {
  @Test(
    "escaping",
    arguments: [
      ("plain", "plain"),
      ("a<b>&\"c'", "a&lt;b&gt;&amp;&quot;c&#39;"),
      ("</svg><script>alert(1)</script>", "&lt;/svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;"),
      ("tab\tnl\n", "tab\tnl\n"),
      ("nul\u{0}bell\u{7}del\u{7F}", "nul\u{FFFD}bell\u{FFFD}del\u{FFFD}"),
      ("caf\u{E9} \u{1F600}", "caf\u{E9} \u{1F600}"),
      ("\u{FFFE}", "\u{FFFD}"),
    ])
  func escaping(_ input: String, _ expected: String) {
    #expect(Markup.escaped(input) == expected)
  }

  @Test func elements() {
    #expect(Markup.element("rect", [("x", "1"), ("title", "a\"b")]) == #"<rect x="1" title="a&quot;b"/>"#)
    #expect(Markup.element("g", [], "<rect/>") == "<g><rect/></g>")
    #expect(Markup.text("td", [("data-key", "k")], "1 < 2") == #"<td data-key="k">1 &lt; 2</td>"#)
  }

  @Test(arguments: [
    (0.0, "0"), (1.5, "1.5"), (2.004, "2"), (-0.25, "-0.25"), (123456789.126, "123456789.13"), (.nan, "0"),
  ])
  func numbers(_ value: Double, _ expected: String) {
    #expect(Markup.number(value) == expected)
  }

  @Test func medians() {
    #expect(Statistics.median([]) == nil)
    #expect(Statistics.median([3, 1, 2]) == 2)
    #expect(Statistics.median([4, 1, 3, 2]) == 2.5)
    #expect(Statistics.seconds(0.25) == "0.25 s")
    #expect(Statistics.seconds(12.34) == "12.3 s")
    #expect(Statistics.seconds(125) == "2 min 5 s")
  }
}
