import AppBoxEvents
import Testing

/// The decoder's JSON: strict, exact integers, finite numbers, nothing that can crash.
@Suite("JSON line decoder")
struct JSONLineDecoderTests {
  struct Numbers: Decodable, Equatable {
    var int: Int64?
    var unsigned: UInt64?
    var small: Int8?
    var double: Double?
  }

  func decode(_ text: String) throws(EventLineError) -> Numbers {
    try JSONLineDecoder.decode(Numbers.self, from: Array(text.utf8))
  }

  @Test("integers are read exactly, to the last digit of Int64")
  func exactIntegers() throws {
    #expect(try decode(#"{"int":9223372036854775807}"#).int == .max)
    #expect(try decode(#"{"int":-9223372036854775808}"#).int == .min)
    #expect(try decode(#"{"int":-0}"#).int == 0)
    #expect(try decode(#"{"unsigned":18446744073709551615}"#).unsigned == .max)
    #expect(try decode(#"{"small":-128}"#).small == -128)
  }

  @Test(
    "what an integer cannot be is refused, never trapped on",
    arguments: [
      #"{"int":9223372036854775808}"#, #"{"int":-9223372036854775809}"#, #"{"int":1e300}"#, #"{"int":1.5}"#,
      #"{"int":4096.0}"#, #"{"int":99999999999999999999999999999999}"#, #"{"unsigned":-1}"#, #"{"small":128}"#,
      #"{"int":"1"}"#, #"{"int":true}"#, #"{"int":[1]}"#,
    ])
  func badIntegers(_ text: String) {
    #expect(throws: EventLineError.self) { try decode(text) }
  }

  @Test("doubles: any finite JSON number; one beyond Double's range is refused")
  func doubles() throws {
    #expect(try decode(#"{"double":1e308}"#).double == 1e308)
    #expect(try decode(#"{"double":-1.7976931348623157e308}"#).double == -.greatestFiniteMagnitude)
    #expect(try decode(#"{"double":1E+2}"#).double == 100)
    #expect(try decode(#"{"double":5e-324}"#).double == .leastNonzeroMagnitude)
    #expect(throws: EventLineError.self) { try decode(#"{"double":1e400}"#) }
    #expect(throws: EventLineError.self) { try decode(#"{"double":-1e309}"#) }
  }

  @Test(
    "not JSON, or not one object",
    arguments: [
      "", " ", "[]", "null", "1", #""s""#, "{", "}", #"{"a":1,}"#, #"{"a":1 "b":2}"#, #"{"a"}"#, #"{a:1}"#,
      #"{"a":01}"#, #"{"a":1.}"#, #"{"a":.5}"#, #"{"a":-}"#, #"{"a":1e}"#, #"{"a":+1}"#, #"{"a":NaN}"#,
      #"{"a":Infinity}"#, #"{"a":tru}"#, #"{"a":nul}"#, #"{"a":"\x"}"#, #"{"a":"\u12"}"#, "{\"a\":\"\n\"}",
      #"{"a":"unterminated}"#, #"{"a":1}{"b":2}"#, #"{"a":1} x"#, #"{"a":1,"a":2}"#, #"{"a":[1,]}"#, #"{"a":[1 2]}"#,
      #"{"a":{"b"}}"#, #"{"a":{"b":1,}}"#, #"{"a":[}"#, #"{"a":]}"#,
    ])
  func notJSON(_ text: String) {
    #expect(throws: EventLineError.self) { try JSONLineDecoder.decode(Numbers.self, from: Array(text.utf8)) }
  }

  @Test("members a type does not read are skipped, nested ones included, up to the depth limit")
  func unknownMembers() throws {
    let nested = #"{"future":{"a":[1,{"b":[true,false,null,"x\"]"]}],"c":{}},"int":5,"list":[]}"#
    #expect(try decode(nested).int == 5)
    let deep = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
    #expect(try decode(#"{"x":"# + deep + #","int":1}"#).int == 1)
    let tooDeep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
    #expect(throws: EventLineError.self) { try decode(#"{"x":"# + tooDeep + "}") }
    let unclosed = String(repeating: "{\"a\":", count: 50_000)
    #expect(throws: EventLineError.self) { try decode(#"{"x":"# + unclosed) }
  }

  @Test("escapes and surrogate pairs decode; lone surrogates become U+FFFD")
  func strings() throws {
    struct Text: Decodable { var s: String }
    func text(_ json: String) throws(EventLineError) -> String {
      let decoded = try JSONLineDecoder.decode(Text.self, from: Array(json.utf8))
      return decoded.s
    }
    #expect(try text(#"{"s":"a\"b\\c\/d\b\f\n\r\t"}"#) == "a\"b\\c/d\u{8}\u{C}\n\r\t")
    #expect(try text(#"{"s":"\u00e9\u2028\ud83d\ude00"}"#) == "é\u{2028}😀")
    #expect(try text(#"{"s":"\ud83d"}"#) == "\u{FFFD}")
    #expect(try text(#"{"s":"\ude00x"}"#) == "\u{FFFD}x")
    #expect(try text(#"{"s":"\ud83d\u0041"}"#) == "\u{FFFD}A")
    // Raw bytes that are not UTF-8 are replaced, not refused.
    #expect(
      try JSONLineDecoder.decode(Text.self, from: Array(#"{"s":""#.utf8) + [0xFF] + Array(#""}"#.utf8)).s == "\u{FFFD}")
  }
}
