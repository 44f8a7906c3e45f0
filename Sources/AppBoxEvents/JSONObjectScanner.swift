/// One JSON value of an event line's top-level object, as the scanner keeps it.
enum JSONMember: Sendable, Equatable {
  /// A string, unescaped.
  case string(String)
  /// A number's text, checked against JSON's grammar (converted on demand, exactly).
  case number([UInt8])
  /// `true` or `false`.
  case bool(Bool)
  /// `null`.
  case null
  /// An array or object (checked, skipped: no event field is one).
  case composite
}

/// Reads the top-level object of one line into its members: strict JSON (RFC 8259), in
/// pure Swift, without recursion (nested arrays and objects are checked and skipped up to
/// ``maximumDepth``), so no line, however hostile, can crash or exhaust the reader.
enum JSONObjectScanner {
  /// How deep arrays and objects may nest inside the top-level object.
  static let maximumDepth = 64

  /// The members of the object `line` holds (whitespace around it allowed).
  /// - Throws: ``EventLineError/notJSON(_:)`` with the reason.
  static func members(_ line: some Collection<UInt8>) throws(EventLineError) -> [String: JSONMember] {
    let bytes = Array(line)
    var scanner = Cursor(bytes: bytes)
    return try scanner.object()
  }

  private struct Cursor {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index >= bytes.count }
    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipSpace() {
      while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    mutating func expect(_ byte: UInt8, _ what: String) throws(EventLineError) {
      guard current == byte else { throw .notJSON("expected \(what) at byte \(index)") }
      index += 1
    }

    mutating func object() throws(EventLineError) -> [String: JSONMember] {
      skipSpace()
      try expect(UInt8(ascii: "{"), "an object")
      var members: [String: JSONMember] = [:]
      skipSpace()
      if current == UInt8(ascii: "}") {
        index += 1
      } else {
        while true {
          skipSpace()
          guard current == UInt8(ascii: "\"") else { throw .notJSON("expected a member name at byte \(index)") }
          let key = try string()
          skipSpace()
          try expect(UInt8(ascii: ":"), "':'")
          skipSpace()
          let value = try value()
          guard members.updateValue(value, forKey: key) == nil else { throw .notJSON("member \(key) twice") }
          skipSpace()
          if current == UInt8(ascii: ",") {
            index += 1
            continue
          }
          try expect(UInt8(ascii: "}"), "',' or '}'")
          break
        }
      }
      skipSpace()
      guard atEnd else { throw .notJSON("text after the object at byte \(index)") }
      return members
    }

    mutating func value() throws(EventLineError) -> JSONMember {
      guard let byte = current else { throw .notJSON("expected a value at the end") }
      switch byte {
      case UInt8(ascii: "\""): return .string(try string())
      case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
      case UInt8(ascii: "t"):
        try literal("true")
        return .bool(true)
      case UInt8(ascii: "f"):
        try literal("false")
        return .bool(false)
      case UInt8(ascii: "n"):
        try literal("null")
        return .null
      case UInt8(ascii: "["), UInt8(ascii: "{"):
        try skipComposite()
        return .composite
      default: throw .notJSON("expected a value at byte \(index)")
      }
    }

    mutating func literal(_ word: String) throws(EventLineError) {
      for byte in word.utf8 { try expect(byte, word) }
    }

    /// A number's text, checked: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    mutating func number() throws(EventLineError) -> [UInt8] {
      let start = index
      func digits(_ cursor: inout Cursor) -> Int {
        let from = cursor.index
        while let byte = cursor.current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { cursor.index += 1 }
        return cursor.index - from
      }
      if current == UInt8(ascii: "-") { index += 1 }
      if current == UInt8(ascii: "0") {
        index += 1
      } else if digits(&self) == 0 {
        throw .notJSON("a number without digits at byte \(start)")
      }
      if current == UInt8(ascii: ".") {
        index += 1
        guard digits(&self) > 0 else { throw .notJSON("a number without fraction digits at byte \(start)") }
      }
      if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
        index += 1
        if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
        guard digits(&self) > 0 else { throw .notJSON("a number without exponent digits at byte \(start)") }
      }
      return Array(bytes[start..<index])
    }

    /// A string at the cursor (its opening quote), unescaped; ill-formed UTF-8 inside it
    /// and lone surrogates become U+FFFD.
    mutating func string() throws(EventLineError) -> String {
      index += 1
      var out: [UInt8] = []
      while true {
        guard let byte = current else { throw .notJSON("a string without its closing quote") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""):
          return String(decoding: out, as: UTF8.self)
        case UInt8(ascii: "\\"):
          guard let escaped = current else { throw .notJSON("a string without its closing quote") }
          index += 1
          switch escaped {
          case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escaped)
          case UInt8(ascii: "b"): out.append(0x08)
          case UInt8(ascii: "f"): out.append(0x0C)
          case UInt8(ascii: "n"): out.append(0x0A)
          case UInt8(ascii: "r"): out.append(0x0D)
          case UInt8(ascii: "t"): out.append(0x09)
          case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar), bytes[index...].starts(with: Array("\\u".utf8)) {
              let saved = index
              index += 2
              let low = try hex4()
              if (0xDC00..<0xE000).contains(low) {
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
              } else {
                index = saved
              }
            }
            out += String(Character(Unicode.Scalar(scalar) ?? "\u{FFFD}")).utf8
          default: throw .notJSON("an unknown escape \\\(Character(Unicode.Scalar(escaped))) at byte \(index - 1)")
          }
        case 0x00..<0x20:
          throw .notJSON("a control character in a string at byte \(index - 1)")
        default:
          out.append(byte)
        }
      }
    }

    mutating func hex4() throws(EventLineError) -> UInt32 {
      var value: UInt32 = 0
      for _ in 0..<4 {
        guard let byte = current, let digit = Self.hexValue(byte) else {
          throw .notJSON("a \\u escape without four hex digits at byte \(index)")
        }
        value = value << 4 | UInt32(digit)
        index += 1
      }
      return value
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
      default: nil
      }
    }

    /// Checks and skips an array or object at the cursor, iteratively.
    mutating func skipComposite() throws(EventLineError) {
      // What each open level expects next; true: an object (member names before values).
      var levels: [Bool] = []
      var expectingValue = true
      while true {
        skipSpace()
        if expectingValue {
          switch current {
          case UInt8(ascii: "[")?, UInt8(ascii: "{")?:
            let isObject = current == UInt8(ascii: "{")
            guard levels.count < JSONObjectScanner.maximumDepth else {
              throw .notJSON("nested deeper than \(JSONObjectScanner.maximumDepth) levels")
            }
            levels.append(isObject)
            index += 1
            skipSpace()
            let closing = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
            if current == closing {
              index += 1
              levels.removeLast()
              if levels.isEmpty { return }
              expectingValue = false
              continue
            }
            if isObject { try memberName() }
            continue
          default:
            _ = try value()
            expectingValue = false
          }
        }
        skipSpace()
        guard let isObject = levels.last else { return }
        if current == UInt8(ascii: ",") {
          index += 1
          if isObject {
            skipSpace()
            try memberName()
          }
          expectingValue = true
          continue
        }
        try expect(isObject ? UInt8(ascii: "}") : UInt8(ascii: "]"), isObject ? "'}'" : "']'")
        levels.removeLast()
        if levels.isEmpty { return }
      }
    }

    /// A member name and its colon, inside a skipped object.
    mutating func memberName() throws(EventLineError) {
      guard current == UInt8(ascii: "\"") else { throw .notJSON("expected a member name at byte \(index)") }
      _ = try string()
      skipSpace()
      try expect(UInt8(ascii: ":"), "':'")
    }
  }
}
