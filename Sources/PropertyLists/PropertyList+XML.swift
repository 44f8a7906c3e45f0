/// Apple's XML property-list format, behind ``PropertyList/encoded(as:)`` and
/// ``PropertyList/init(decoding:)``: a writer that writes as Apple's does (declaration,
/// DTD, tab indentation) and a strict, bounded reader of what Apple's writer and Python's
/// `plistlib` write.
///
/// Elements: `plist`, `dict` (`key` and value pairs), `array`, `string`, `integer`,
/// `real`, `true`, `false`, `date` (ISO 8601 in UTC, whole seconds), `data` (base64). The
/// reader also takes the XML declaration, a DOCTYPE, comments, the five named entities,
/// character references and CDATA. XML has no UID: as in Apple's archives, a UID is a
/// dictionary whose only key is `CF$UID`.
enum XMLFormat {
  /// Seconds from 1970-01-01 to 2001-01-01 (Apple's reference date), both UTC.
  static let referenceDate: Int64 = 978_307_200

  /// Whether `bytes` start like an XML plist (after a byte-order mark and white space).
  static func matches(_ bytes: some Collection<UInt8>) -> Bool {
    var rest = bytes.drop { _ in false }
    if rest.starts(with: [0xEF, 0xBB, 0xBF]) { rest = rest.dropFirst(3) }
    rest = rest.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
    return rest.starts(with: "<?xml".utf8) || rest.starts(with: "<!DOCTYPE plist".utf8)
      || rest.starts(with: "<plist".utf8)
  }

  // MARK: - Writing

  /// The XML plist of `root`.
  static func encode(_ root: PropertyList) -> [UInt8] {
    var out = Array(
      """
      <?xml version="1.0" encoding="UTF-8"?>
      <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
      <plist version="1.0">

      """.utf8)
    write(root, depth: 0, into: &out)
    out += Array("</plist>\n".utf8)
    return out
  }

  private static func write(_ value: PropertyList, depth: Int, into out: inout [UInt8]) {
    let indent = [UInt8](repeating: 0x09, count: depth)
    func line(_ text: String) { out += indent + Array(text.utf8) + [0x0A] }
    func element(_ name: String, _ content: [UInt8]) {
      out += indent + Array("<\(name)>".utf8) + content + Array("</\(name)>\n".utf8)
    }
    switch value {
    case .string(let text): element("string", escape(text))
    case .integer(let number): element("integer", Array(String(number).utf8))
    case .real(let number): element("real", Array(realText(number).utf8))
    case .boolean(let flag): line(flag ? "<true/>" : "<false/>")
    case .date(let seconds): element("date", Array(dateText(seconds).utf8))
    case .data(let bytes): element("data", Base64.encode(bytes))
    case .uid(let reference):
      write(.dictionary([("CF$UID", .integer(Int64(clamping: reference)))]), depth: depth, into: &out)
    case .array(let elements):
      guard !elements.isEmpty else { return line("<array/>") }
      line("<array>")
      for element in elements { write(element, depth: depth + 1, into: &out) }
      line("</array>")
    case .dictionary(let pairs):
      guard !pairs.isEmpty else { return line("<dict/>") }
      line("<dict>")
      for (key, element) in pairs {
        out += indent + [0x09] + Array("<key>".utf8) + escape(key) + Array("</key>\n".utf8)
        write(element, depth: depth + 1, into: &out)
      }
      line("</dict>")
    }
  }

  private static func escape(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(text.utf8.count)
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "&"): out += Array("&amp;".utf8)
      case UInt8(ascii: "<"): out += Array("&lt;".utf8)
      case UInt8(ascii: ">"): out += Array("&gt;".utf8)
      default: out.append(byte)
      }
    }
    return out
  }

  private static func realText(_ number: Double) -> String {
    if number.isNaN { return "nan" }
    if number.isInfinite { return number < 0 ? "-infinity" : "+infinity" }
    return "\(number)"
  }

  /// `YYYY-MM-DDTHH:MM:SSZ` of seconds since 2001 (fractions dropped, as Apple's writer does).
  static func dateText(_ seconds: Double) -> String {
    // Kept within ±31 million years, where the calendar's arithmetic cannot overflow.
    let whole = seconds.isFinite ? Swift.max(Swift.min(seconds.rounded(.down), 1e15), -1e15) : 0
    let unix = Int64(whole) + referenceDate
    let (days, second) = (unix.floorDivided(by: 86_400), unix.floorModulo(86_400))
    let (year, month, day) = civil(fromDays: days)
    func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
    let yearText = String(year)
    let padded = year >= 0 && year < 1000 ? String(repeating: "0", count: 4 - yearText.count) + yearText : yearText
    return "\(padded)-\(two(month))-\(two(day))T\(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60))Z"
  }

  // MARK: - Reading

  /// Decodes an XML plist.
  static func decode(_ bytes: [UInt8]) throws(PropertyListError) -> PropertyList {
    var reader = Reader(bytes: bytes)
    return try reader.document()
  }

  private struct Tag {
    var name: [UInt8]
    var closing: Bool
    var empty: Bool
  }

  private struct Reader {
    let bytes: [UInt8]
    var index = 0
    /// Elements left to read: an input cannot make more than it has bytes for.
    var budget: Int

    init(bytes: [UInt8]) {
      self.bytes = bytes
      budget = bytes.count / 4 + 16
      if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
    }

    mutating func document() throws(PropertyListError) -> PropertyList {
      try skipMisc()
      let root = try tag()
      guard root.name == Array("plist".utf8), !root.closing, !root.empty else {
        throw .malformed("no <plist> element")
      }
      let value = try self.value(depth: 0)
      try skipMisc()
      try expectClosing("plist")
      try skipMisc()
      guard index == bytes.count else { throw .malformed("content after </plist>") }
      return value
    }

    // MARK: Values

    mutating func value(depth: Int) throws(PropertyListError) -> PropertyList {
      budget -= 1
      guard depth < 64, budget > 0 else { throw .tooComplex }
      try skipMisc()
      let open = try tag()
      guard !open.closing else { throw .malformed("</\(text(open.name))> where a value belongs") }
      switch text(open.name) {
      case "dict": return open.empty ? .dictionary([]) : try dictionary(depth: depth)
      case "array": return open.empty ? .array([]) : try array(depth: depth)
      case "string": return .string(try string(open))
      case "integer":
        guard let number = Int64(try trimmed(open)) else { throw .malformed("integer") }
        return .integer(number)
      case "real":
        guard let number = Self.real(try trimmed(open)) else { throw .malformed("real") }
        return .real(number)
      case "true", "false":
        guard try content(open).allSatisfy(Self.isSpace) else { throw .malformed("<\(text(open.name))> with content") }
        return .boolean(open.name == Array("true".utf8))
      case "date":
        guard let seconds = Self.date(try trimmed(open)) else { throw .malformed("date") }
        return .date(seconds)
      case "data":
        guard let data = Base64.decode(try content(open)) else { throw .malformed("base64 data") }
        return .data(data)
      default: throw .malformed("unknown element <\(text(open.name))>")
      }
    }

    mutating func dictionary(depth: Int) throws(PropertyListError) -> PropertyList {
      var pairs: [(String, PropertyList)] = []
      while true {
        try skipMisc()
        let key = try tag()
        if key.closing, key.name == Array("dict".utf8) { break }
        guard !key.closing, key.name == Array("key".utf8) else { throw .malformed("a <dict> entry without <key>") }
        let name = try string(key)
        pairs.append((name, try value(depth: depth + 1)))
      }
      if pairs.count == 1, pairs[0].0 == "CF$UID", case .integer(let reference) = pairs[0].1, reference >= 0 {
        return .uid(UInt64(reference))
      }
      return .dictionary(pairs)
    }

    mutating func array(depth: Int) throws(PropertyListError) -> PropertyList {
      var elements: [PropertyList] = []
      while true {
        try skipMisc()
        if bytes[index...].starts(with: "</".utf8) {
          try expectClosing("array")
          return .array(elements)
        }
        elements.append(try value(depth: depth + 1))
      }
    }

    mutating func string(_ open: Tag) throws(PropertyListError) -> String {
      let content = try content(open)
      guard let text = String(validating: content, as: UTF8.self) else { throw .malformed("text is not UTF-8") }
      return text
    }

    mutating func trimmed(_ open: Tag) throws(PropertyListError) -> String {
      String(
        decoding: try content(open).drop(while: Self.isSpace).reversed().drop(while: Self.isSpace).reversed(),
        as: UTF8.self)
    }

    // MARK: Markup

    /// The text of an element up to its closing tag: entities and character references
    /// decoded, CDATA taken as it is, comments left out.
    mutating func content(_ open: Tag) throws(PropertyListError) -> [UInt8] {
      if open.empty { return [] }
      var out: [UInt8] = []
      while index < bytes.count {
        let byte = bytes[index]
        if byte == UInt8(ascii: "&") {
          out += try reference()
        } else if byte == UInt8(ascii: "<") {
          if bytes[index...].starts(with: "<![CDATA[".utf8) {
            let start = index + 9
            guard let end = find("]]>", from: start) else { throw .malformed("unterminated CDATA") }
            out += bytes[start..<end]
            index = end + 3
          } else if bytes[index...].starts(with: "<!--".utf8) {
            try skipComment()
          } else {
            try expectClosing(open.name)
            return out
          }
        } else {
          out.append(byte)
          index += 1
        }
      }
      throw .malformed("unterminated <\(text(open.name))>")
    }

    /// An entity or character reference at `&`, as UTF-8.
    mutating func reference() throws(PropertyListError) -> [UInt8] {
      guard let end = bytes[index...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
        throw .malformed("a bare &")
      }
      let name = String(decoding: bytes[(index + 1)..<end], as: UTF8.self)
      index = end + 1
      switch name {
      case "lt": return [UInt8(ascii: "<")]
      case "gt": return [UInt8(ascii: ">")]
      case "amp": return [UInt8(ascii: "&")]
      case "quot": return [UInt8(ascii: "\"")]
      case "apos": return [UInt8(ascii: "'")]
      default:
        let number: UInt32?
        if name.hasPrefix("#x") {
          number = UInt32(name.dropFirst(2), radix: 16)
        } else if name.hasPrefix("#") {
          number = UInt32(name.dropFirst(1))
        } else {
          number = nil
        }
        guard let number, number != 0, let scalar = Unicode.Scalar(number) else {
          throw .malformed("unknown reference &\(name.prefix(10));")
        }
        return Array(String(Character(scalar)).utf8)
      }
    }

    /// A tag at the current position (attributes skipped).
    mutating func tag() throws(PropertyListError) -> Tag {
      guard index < bytes.count, bytes[index] == UInt8(ascii: "<") else { throw .malformed("text where a tag belongs") }
      index += 1
      let closing = index < bytes.count && bytes[index] == UInt8(ascii: "/")
      if closing { index += 1 }
      let start = index
      while index < bytes.count, Self.isNameByte(bytes[index]) { index += 1 }
      let name = Array(bytes[start..<index])
      guard !name.isEmpty else { throw .malformed("a tag without a name") }
      var quote: UInt8?
      while index < bytes.count {
        let byte = bytes[index]
        index += 1
        if let open = quote {
          if byte == open { quote = nil }
        } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
          quote = byte
        } else if byte == UInt8(ascii: ">") {
          let empty = bytes[index - 2] == UInt8(ascii: "/")
          guard !(closing && empty) else { throw .malformed("</\(text(name))/>") }
          return Tag(name: name, closing: closing, empty: empty)
        }
      }
      throw .malformed("unterminated tag <\(text(name))")
    }

    mutating func expectClosing(_ name: String) throws(PropertyListError) {
      try expectClosing(Array(name.utf8))
    }

    mutating func expectClosing(_ name: [UInt8]) throws(PropertyListError) {
      let closing = try tag()
      guard closing.closing, closing.name == name else {
        throw .malformed("<\(text(closing.name))> where </\(text(name))> belongs")
      }
    }

    /// Skips white space, comments, processing instructions and a DOCTYPE.
    mutating func skipMisc() throws(PropertyListError) {
      while index < bytes.count {
        if Self.isSpace(bytes[index]) {
          index += 1
        } else if bytes[index...].starts(with: "<!--".utf8) {
          try skipComment()
        } else if bytes[index...].starts(with: "<?".utf8) {
          guard let end = find("?>", from: index + 2) else { throw .malformed("unterminated <?") }
          index = end + 2
        } else if bytes[index...].starts(with: "<!DOCTYPE".utf8) {
          // Up to the `>` outside an internal subset `[...]`.
          var inSubset = false
          index += 9
          while index < bytes.count, inSubset || bytes[index] != UInt8(ascii: ">") {
            if bytes[index] == UInt8(ascii: "[") { inSubset = true }
            if bytes[index] == UInt8(ascii: "]") { inSubset = false }
            index += 1
          }
          guard index < bytes.count else { throw .malformed("unterminated DOCTYPE") }
          index += 1
        } else {
          return
        }
      }
    }

    mutating func skipComment() throws(PropertyListError) {
      guard let end = find("-->", from: index + 4) else { throw .malformed("unterminated comment") }
      index = end + 3
    }

    func find(_ marker: String, from start: Int) -> Int? {
      let pattern = Array(marker.utf8)
      guard start <= bytes.count - pattern.count else { return nil }
      var at = start
      while at <= bytes.count - pattern.count {
        if bytes[at] == pattern[0], bytes[at..<at + pattern.count].elementsEqual(pattern) { return at }
        at += 1
      }
      return nil
    }

    func text(_ name: [UInt8]) -> String { String(decoding: name.prefix(40), as: UTF8.self) }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    static func isNameByte(_ byte: UInt8) -> Bool {
      (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        || byte == UInt8(ascii: ":")
    }

    static func real(_ text: String) -> Double? {
      switch text.lowercased() {
      case "nan": return .nan
      case "inf", "+inf", "infinity", "+infinity": return .infinity
      case "-inf", "-infinity": return -.infinity
      default:
        guard !text.isEmpty, text.utf8.allSatisfy({ Array("0123456789+-.eE".utf8).contains($0) }) else { return nil }
        return Double(text)
      }
    }

    /// Seconds since 2001 of `YYYY-MM-DDTHH:MM:SSZ`.
    static func date(_ text: String) -> Double? {
      let bytes = Array(text.utf8)
      guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
        bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
        bytes[19] == UInt8(ascii: "Z")
      else { return nil }
      func number(_ range: Range<Int>) -> Int64? {
        guard bytes[range].allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int64(String(decoding: bytes[range], as: UTF8.self))
      }
      guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
        let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
        (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
      else { return nil }
      let days = XMLFormat.days(fromCivil: year, month, day)
      return Double(days * 86_400 + hour * 3600 + minute * 60 + second - XMLFormat.referenceDate)
    }
  }

  // MARK: - Calendar (proleptic Gregorian, after Howard Hinnant's algorithms)

  static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = y.floorDivided(by: 400)
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
  }

  static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
    let z = days + 719_468
    let era = z.floorDivided(by: 146_097)
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
  }
}

extension Int64 {
  fileprivate func floorDivided(by divisor: Int64) -> Int64 {
    let quotient = self / divisor
    return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
  }

  fileprivate func floorModulo(_ divisor: Int64) -> Int64 { self - floorDivided(by: divisor) * divisor }
}

/// Base64 (RFC 4648, with padding), for the `data` element.
enum Base64 {
  private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

  /// The base64 text of `bytes`.
  static func encode(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var index = 0
    while index < bytes.count {
      let chunk = bytes[index..<Swift.min(index + 3, bytes.count)]
      let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * $1.offset) }
      for position in 0..<4 {
        out.append(position <= chunk.count ? alphabet[Int(value >> (18 - 6 * position) & 0x3F)] : UInt8(ascii: "="))
      }
      index += 3
    }
    return out
  }

  /// The bytes of base64 text (white space ignored), or nil when it is not base64.
  static func decode(_ text: [UInt8]) -> [UInt8]? {
    var out: [UInt8] = []
    var value: UInt32 = 0
    var bits = 0
    var padding = 0
    for byte in text {
      if byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { continue }
      if byte == UInt8(ascii: "=") {
        padding += 1
        continue
      }
      guard padding == 0, let digit = alphabet.firstIndex(of: byte) else { return nil }
      value = value << 6 | UInt32(digit)
      bits += 6
      if bits >= 8 {
        bits -= 8
        out.append(UInt8(truncatingIfNeeded: value >> UInt32(bits)))
        value &= (1 << UInt32(bits)) - 1
      }
    }
    guard padding <= 2 else { return nil }
    return out
  }
}
