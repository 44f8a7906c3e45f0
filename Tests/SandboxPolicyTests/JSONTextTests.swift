import Testing

@testable import SandboxPolicy

@Suite("JSONText")
struct JSONTextTests {
  @Test(
    "quoting",
    arguments: [
      ("", #""""#),
      ("plain", #""plain""#),
      ("a\"b", #""a\"b""#),
      ("back\\slash", #""back\\slash""#),
      ("line\nfeed", #""line\u000afeed""#),
      ("tab\tcr\r", #""tab\u0009cr\u000d""#),
      ("\u{0}", #""\u0000""#),
      ("\u{1B}[31m", #""\u001b[31m""#),
      ("\u{1F}\u{7F}", #""\u001f\u007f""#),
      ("\u{2028}\u{2029}", #""\u2028\u2029""#),
      ("é/日本/🙂", "\"é/日本/🙂\""),
      ("/slash", #""/slash""#),
    ])
  func quoted(_ input: String, _ expected: String) {
    #expect(JSONText.quoted(input) == expected)
    #expect(JSONText.quoted(bytes: Array(input.utf8)) == expected)
  }

  @Test func invalidUTF8BecomesReplacementCharacter() {
    #expect(JSONText.quoted(bytes: [0x61, 0xFF, 0x62]) == "\"a\u{FFFD}b\"")
    #expect(JSONText.quoted(bytes: [0xC3]) == "\"\u{FFFD}\"")
    // A truncated 3-byte sequence is one maximal subpart: one replacement.
    #expect(JSONText.quoted(bytes: [0xE6, 0x97, 0x41]) == "\"\u{FFFD}A\"")
    // Surrogates encoded in UTF-8 are ill-formed.
    #expect(!JSONText.isValidUTF8([0xED, 0xA0, 0x80]))
    #expect(JSONText.isValidUTF8(Array("日本".utf8)))
    #expect(JSONText.isValidUTF8([UInt8]()))
    #expect(!JSONText.isValidUTF8([0xC0, 0x80]))
  }

  @Test func numbers() {
    #expect(JSONText.number(0) == "0.0")
    #expect(JSONText.number(1_700_000_000.5) == "1700000000.5")
    #expect(JSONText.number(-2) == "-2.0")
    #expect(JSONText.number(.infinity) == "null")
    #expect(JSONText.number(.nan) == "null")
  }

  @Test func hex() {
    #expect(JSONText.hex([0x00, 0x0F, 0xA5, 0xFF]) == "000fa5ff")
    #expect(JSONText.hex([UInt8]()) == "")
  }
}
