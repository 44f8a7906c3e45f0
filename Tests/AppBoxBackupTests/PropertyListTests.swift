import SandboxPolicy
import TestSupport
import Testing

@testable import AppBoxBackup
@testable import PropertyLists

@Suite("Property lists: one codec, binary and XML, both ways")
struct PropertyListTests {
  static let values: [PropertyList] = [
    .string("ascii"), .string("ünïcödé ✓"), .string(""), .string("<&> \"quoted\" 'single'"), .integer(0),
    .integer(255), .integer(256), .integer(70_000), .integer(5_000_000_000), .integer(-1), .integer(.min),
    .integer(.max), .real(1.5), .real(-0.25), .real(1e300), .real(.infinity), .real(-.infinity), .boolean(true),
    .boolean(false), .date(123), .date(-978_307_200), .data([]), .data(Array(0...255)), .uid(0), .uid(300),
    .array([]), .dictionary([]), .array((0..<40).map { .integer(Int64($0)) }),
    .dictionary([
      ("b", .string("x")), ("a", .array([.uid(1), .data([1, 2])])), ("$top", .dictionary([("root", .uid(1))])),
    ]),
    .string(String(repeating: "long", count: 100)),
  ]

  @Test("every value round-trips through the binary format", arguments: values)
  func binaryRoundTrip(_ value: PropertyList) throws {
    #expect(try PropertyList(decoding: value.encoded(as: .binary)) == value)
  }

  @Test("every value round-trips through the XML format", arguments: values)
  func xmlRoundTrip(_ value: PropertyList) throws {
    let xml = value.encoded(as: .xml)
    #expect(PropertyList.format(of: xml) == .xml)
    #expect(try PropertyList(decoding: xml) == value, "\(String(decoding: xml, as: UTF8.self))")
  }

  @Test("NaN survives both formats")
  func notANumber() throws {
    for format in [PropertyList.Format.binary, .xml] {
      guard case .real(let back) = try PropertyList(decoding: PropertyList.real(.nan).encoded(as: format)) else {
        Issue.record("not a real")
        continue
      }
      #expect(back.isNaN)
    }
  }

  @Test("70,000 objects need wider references")
  func manyObjects() throws {
    let value = PropertyList.array((0..<70_000).map { .integer(Int64($0)) })
    #expect(try PropertyList(decoding: value.encoded(as: .binary)) == value)
  }

  @Test("Apple's exclusion value is what the codec writes for com.apple.backupd, and reads back")
  func exclusionValue() throws {
    #expect(PropertyList.string(BackupExclusion.appleValueString).encoded(as: .binary) == BackupExclusion.appleValue)
    #expect(try PropertyList(decoding: BackupExclusion.appleValue) == .string("com.apple.backupd"))
  }

  @Test(
    "strings of every length class round-trip, ASCII one byte a character",
    arguments: [
      "", "a", "fourteen chars", "fifteen chars!!", String(repeating: "x", count: 300),
      String(repeating: "y", count: 70_000),
    ])
  func stringLengths(_ text: String) throws {
    let encoded = PropertyList.string(text).encoded(as: .binary)
    #expect(try PropertyList(decoding: encoded) == .string(text))
    #expect(encoded.count < text.utf8.count + 8 + 32 + 12)
  }

  @Test("bad input is an error, never a trap: every truncation and single-byte change of both formats")
  func badInput() {
    #expect(throws: PropertyListError.notPropertyList) { try PropertyList(decoding: Array("hello".utf8)) }
    #expect(throws: PropertyListError.notPropertyList) { try PropertyList(decoding: []) }
    let sample = PropertyList.dictionary([
      ("a", .array([.string("x"), .data([1, 2, 3]), .date(5), .real(2.5)])), ("b", .dictionary([("c", .uid(2))])),
    ])
    for format in [PropertyList.Format.binary, .xml] {
      let good = sample.encoded(as: format)
      for length in 0..<good.count {
        _ = try? PropertyList(decoding: Array(good.prefix(length)))  // decodes or throws: either is fine
      }
      for index in good.indices {
        for byte: UInt8 in [0x00, 0x0F, 0x3C, 0x7F, 0xFF] {
          var bad = good
          bad[index] = byte
          _ = try? PropertyList(decoding: bad)  // decodes or throws: either is fine
        }
      }
    }
  }

  @Test("a reference cycle and a nesting bomb are too complex")
  func bombs() {
    var cycle = PropertyList.array([.integer(1)]).encoded(as: .binary)
    cycle[9] = 0  // the array's one reference now points at the array
    #expect(throws: PropertyListError.tooComplex) { try PropertyList(decoding: cycle) }
    let deep =
      "<plist>" + String(repeating: "<array>", count: 100) + String(repeating: "</array>", count: 100) + "</plist>"
    #expect(throws: PropertyListError.tooComplex) { try PropertyList(decoding: Array(deep.utf8)) }
  }

  /// An `Info.plist` as iTunes writes it, comments, entities and CDATA added.
  static let appleXML = """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0">
    <dict>
    \t<!-- a comment -->
    \t<key>Device Name</key>
    \t<string>Tom&apos;s iPhone &amp; &#x2713; &#65;</string>
    \t<key>Build Version</key>
    \t<string><![CDATA[21A<329>]]></string>
    \t<key>Last Backup Date</key>
    \t<date>2024-02-29T12:34:56Z</date>
    \t<key>Installed Applications</key>
    \t<array>
    \t\t<string>com.example.one</string>
    \t\t<string/>
    \t</array>
    \t<key>IsEncrypted</key>
    \t<false/>
    \t<key>Count</key>
    \t<integer> -42 </integer>
    \t<key>Ratio</key>
    \t<real>0.5</real>
    \t<key>Blob</key>
    \t<data>
    \tAAEC
    \t/w==
    \t</data>
    \t<key>Empty</key>
    \t<dict/>
    \t<key>Ref</key>
    \t<dict><key>CF$UID</key><integer>7</integer></dict>
    </dict>
    </plist>
    """

  @Test("an Apple-written XML plist reads: entities, CDATA, comments, dates, data, CF$UID")
  func readsAppleXML() throws {
    let plist = try PropertyList(decoding: Array(Self.appleXML.utf8))
    #expect(plist["Device Name"] == .string("Tom's iPhone & ✓ A"))
    #expect(plist["Build Version"] == .string("21A<329>"))
    // 2024-02-29T12:34:56Z is Unix 1709210096.
    #expect(plist["Last Backup Date"] == .date(1_709_210_096 - 978_307_200))
    #expect(plist["Installed Applications"] == .array([.string("com.example.one"), .string("")]))
    #expect(plist["IsEncrypted"] == .boolean(false))
    #expect(plist["Count"] == .integer(-42))
    #expect(plist["Ratio"] == .real(0.5))
    #expect(plist["Blob"] == .data([0, 1, 2, 255]))
    #expect(plist["Empty"] == .dictionary([]))
    #expect(plist["Ref"] == .uid(7))
  }

  @Test(
    "malformed XML is refused",
    arguments: [
      "<plist><dict><key>a</key></dict></plist>", "<plist><string>x</plist>", "<plist><integer>1.5</integer></plist>",
      "<plist><date>2024-13-01T00:00:00Z</date></plist>", "<plist><data>!!</data></plist>",
      "<plist><foo/></plist>", "<plist><string>&bogus;</string></plist>", "<plist><string>a & b</string></plist>",
      "<plist><true>yes</true></plist>", "<plist><string>x</string></plist>trailing", "<plist></plist>",
      "<plist><key>k</key></plist>", "<?xml version=\"1.0\"?><plist><array><string>x</string></plist>",
      "<plist><string>\u{FFFF}</string><string>y</string></plist>",
    ])
  func malformedXML(_ text: String) {
    #expect(throws: PropertyListError.self) { try PropertyList(decoding: Array(text.utf8)) }
  }

  @Test("a string that is not UTF-8 is refused")
  func xmlNotUTF8() {
    let bytes = Array("<plist><string>".utf8) + [0xC3, 0x28] + Array("</string></plist>".utf8)
    #expect(throws: PropertyListError.self) { try PropertyList(decoding: bytes) }
  }

  @Test("dates in XML: leap days, before 1970, far future; whole seconds")
  func xmlDates() throws {
    for (text, unix) in [
      ("2000-02-29T00:00:00Z", 951_782_400), ("1969-12-31T23:59:59Z", -1), ("2001-01-01T00:00:00Z", 978_307_200),
      ("2100-03-01T00:00:00Z", 4_107_542_400),
    ] {
      #expect(XMLFormat.dateText(Double(unix - 978_307_200)) == text)
      let plist = try PropertyList(decoding: Array("<plist><date>\(text)</date></plist>".utf8))
      #expect(plist == .date(Double(unix - 978_307_200)), "\(text)")
    }
    #expect(XMLFormat.dateText(10.75) == "2001-01-01T00:00:10Z")
    #expect(XMLFormat.dateText(.infinity) == "2001-01-01T00:00:00Z")
    #expect(XMLFormat.dateText(1e300).hasSuffix("Z"))
  }

  @Test("base64 both ways, every length")
  func base64() {
    for count in 0..<20 {
      let bytes = pattern(count, seed: UInt64(count))
      #expect(Base64.decode(Base64.encode(bytes)) == bytes)
    }
    #expect(Base64.encode(Array("Man".utf8)) == Array("TWFu".utf8))
    #expect(Base64.encode(Array("Ma".utf8)) == Array("TWE=".utf8))
    #expect(Base64.decode(Array("TW E=\n".utf8)) == Array("Ma".utf8))
    #expect(Base64.decode(Array("TWE=x".utf8)) == nil)
    #expect(Base64.decode(Array("T*E=".utf8)) == nil)
  }
}
