/// Apple's binary property-list format (`bplist00`): a writer and a bounds-checked
/// reader, behind ``PropertyList/encoded(as:)`` and ``PropertyList/init(decoding:)``.
///
/// Layout: the magic, the objects, a table of their offsets, and a 32-byte trailer
/// (offset size, reference size, object count, root object, table offset). Each object
/// starts with a marker byte: high nibble the type, low nibble a size (`0xF`: an integer
/// object with the real size follows).
enum BinaryFormat {
  // MARK: - Writing

  /// The binary plist of `root`.
  static func encode(_ root: PropertyList) -> [UInt8] {
    var objects: [[UInt8]] = []
    var pendingRefs: [(object: Int, refs: [Int])] = []
    func add(_ value: PropertyList) -> Int {
      let index = objects.count
      objects.append([])
      switch value {
      case .string(let text):
        if text.utf8.allSatisfy({ $0 < 0x80 }) {
          objects[index] = marker(0x5, text.utf8.count) + Array(text.utf8)
        } else {
          let units = Array(text.utf16)
          var bytes = marker(0x6, units.count)
          for unit in units { bytes += [UInt8(unit >> 8), UInt8(unit & 0xFF)] }
          objects[index] = bytes
        }
      case .integer(let number): objects[index] = integerBytes(number)
      case .real(let number): objects[index] = [0x23] + bigEndian(number.bitPattern, width: 8)
      case .date(let seconds): objects[index] = [0x33] + bigEndian(seconds.bitPattern, width: 8)
      case .boolean(let flag): objects[index] = [flag ? 0x09 : 0x08]
      case .data(let bytes): objects[index] = marker(0x4, bytes.count) + bytes
      case .uid(let reference):
        let width = byteWidth(reference)
        objects[index] = [0x80 | UInt8(width - 1)] + bigEndian(reference, width: width)
      case .array(let elements):
        objects[index] = marker(0xA, elements.count)
        pendingRefs.append((index, elements.map(add)))
      case .dictionary(let pairs):
        objects[index] = marker(0xD, pairs.count)
        let keys = pairs.map { add(.string($0.0)) }
        let values = pairs.map { add($0.1) }
        pendingRefs.append((index, keys + values))
      }
      return index
    }
    _ = add(root)
    let refWidth = byteWidth(UInt64(objects.count))
    for (object, refs) in pendingRefs {
      for ref in refs { objects[object] += bigEndian(UInt64(ref), width: refWidth) }
    }
    var out = Array("bplist00".utf8)
    var offsets: [UInt64] = []
    for object in objects {
      offsets.append(UInt64(out.count))
      out += object
    }
    let tableOffset = UInt64(out.count)
    let offsetWidth = byteWidth(tableOffset)
    for offset in offsets { out += bigEndian(offset, width: offsetWidth) }
    out += [0, 0, 0, 0, 0, 0, UInt8(offsetWidth), UInt8(refWidth)]
    out += bigEndian(UInt64(objects.count), width: 8) + bigEndian(0, width: 8) + bigEndian(tableOffset, width: 8)
    return out
  }

  private static func marker(_ type: UInt8, _ count: Int) -> [UInt8] {
    count < 15 ? [type << 4 | UInt8(count)] : [type << 4 | 0xF] + integerBytes(Int64(count))
  }

  private static func integerBytes(_ number: Int64) -> [UInt8] {
    if number < 0 { return [0x13] + bigEndian(UInt64(bitPattern: number), width: 8) }
    switch UInt64(number) {
    case 0...0xFF: return [0x10] + bigEndian(UInt64(number), width: 1)
    case 0...0xFFFF: return [0x11] + bigEndian(UInt64(number), width: 2)
    case 0...0xFFFF_FFFF: return [0x12] + bigEndian(UInt64(number), width: 4)
    default: return [0x13] + bigEndian(UInt64(number), width: 8)
    }
  }

  private static func byteWidth(_ value: UInt64) -> Int {
    switch value {
    case 0...0xFF: 1
    case 0...0xFFFF: 2
    case 0...0xFFFF_FFFF: 4
    default: 8
    }
  }

  private static func bigEndian(_ value: UInt64, width: Int) -> [UInt8] {
    (0..<width).map { UInt8(truncatingIfNeeded: value >> UInt64(8 * (width - 1 - $0))) }
  }

  // MARK: - Reading

  /// Whether `bytes` start like a binary plist.
  static func matches(_ bytes: some Collection<UInt8>) -> Bool {
    bytes.starts(with: "bplist00".utf8)
  }

  /// Decodes a binary plist. Every offset, size, count and reference is checked before
  /// it is used, every sum and product through arithmetic that reports overflow, and the
  /// objects and bytes decoded are budgeted (a shared object referenced over and over
  /// is decoded again each time): nothing in the input can make it trap, loop or take
  /// more than a few times its own size in memory.
  static func decode(_ bytes: [UInt8]) throws(PropertyListError) -> PropertyList {
    guard matches(bytes), bytes.count >= 8 + 32 else { throw .notPropertyList }
    var reader = Reader(bytes: bytes)
    return try reader.decodeRoot()
  }

  /// The most nested arrays and dictionaries decoded.
  static let maximumDepth = 64

  private struct Reader {
    let bytes: [UInt8]
    var offsetWidth = 0
    var refWidth = 0
    var objectCount = 0
    var tableOffset = 0
    /// Objects left to decode: four per object in the table (or 1,024).
    var objectBudget = 0
    /// Bytes of strings and data left to decode: four times the input (or 64 KiB).
    var byteBudget = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// `start + count * width`, or nil when that overflows.
    static func end(_ start: Int, _ count: Int, _ width: Int) -> Int? {
      let (product, multiplied) = count.multipliedReportingOverflow(by: width)
      let (sum, added) = start.addingReportingOverflow(product)
      return multiplied || added ? nil : sum
    }

    func unsigned(at offset: Int, width: Int) throws(PropertyListError) -> UInt64 {
      guard width >= 1, width <= 8, offset >= 0, offset <= bytes.count - width else {
        throw .malformed("field outside the data at \(offset)")
      }
      var value: UInt64 = 0
      for index in offset..<offset + width { value = value << 8 | UInt64(bytes[index]) }
      return value
    }

    mutating func decodeRoot() throws(PropertyListError) -> PropertyList {
      let trailer = bytes.count - 32
      offsetWidth = Int(bytes[trailer + 6])
      refWidth = Int(bytes[trailer + 7])
      guard (1...8).contains(offsetWidth), (1...8).contains(refWidth) else { throw .malformed("trailer sizes") }
      let count = try unsigned(at: trailer + 8, width: 8)
      let root = try unsigned(at: trailer + 16, width: 8)
      let table = try unsigned(at: trailer + 24, width: 8)
      // Each compared with the data's length before any arithmetic: from here on they are
      // small enough for an Int.
      guard count > 0, count < UInt64(trailer), root < count, table >= 8, table <= UInt64(trailer) else {
        throw .malformed("trailer")
      }
      objectCount = Int(count)
      tableOffset = Int(table)
      guard let tableEnd = Self.end(tableOffset, objectCount, offsetWidth), tableEnd <= trailer else {
        throw .malformed("offset table beyond the data")
      }
      objectBudget = max(objectCount.multipliedReportingOverflow(by: 4).partialValue, 1024)
      let (fourTimes, overflow) = bytes.count.multipliedReportingOverflow(by: 4)
      byteBudget = overflow ? Int.max : max(fourTimes, 1 << 16)
      return try object(Int(root), depth: 0)
    }

    func offset(of object: Int) throws(PropertyListError) -> Int {
      guard let at = Self.end(tableOffset, object, offsetWidth) else { throw .malformed("object \(object)") }
      let value = try unsigned(at: at, width: offsetWidth)
      guard value >= 8, value < UInt64(tableOffset) else { throw .malformed("object offset") }
      return Int(value)
    }

    /// The length in a marker's low nibble, or the integer that follows it; and where the
    /// content starts.
    func length(marker: UInt8, at offset: Int) throws(PropertyListError) -> (Int, Int) {
      let nibble = Int(marker & 0x0F)
      if nibble != 0x0F { return (nibble, offset + 1) }
      guard offset + 1 < bytes.count, bytes[offset + 1] >> 4 == 0x1 else { throw .malformed("length") }
      let width = 1 << Int(bytes[offset + 1] & 0x0F)
      let value = try unsigned(at: offset + 2, width: width)
      guard value < UInt64(bytes.count) else { throw .malformed("length beyond the data") }
      return (Int(value), offset + 2 + width)
    }

    /// Where `count` elements of `width` bytes at `content` end, checked to lie before the
    /// offset table.
    func contentEnd(_ content: Int, _ count: Int, _ width: Int, _ what: String) throws(PropertyListError) -> Int {
      guard let end = Self.end(content, count, width), end <= tableOffset else {
        throw .malformed("\(what) beyond the objects")
      }
      return end
    }

    /// Takes `count` bytes of strings or data from the budget.
    mutating func spend(_ count: Int) throws(PropertyListError) {
      guard count <= byteBudget else { throw .tooComplex }
      byteBudget -= count
    }

    mutating func object(_ index: Int, depth: Int) throws(PropertyListError) -> PropertyList {
      objectBudget -= 1
      guard depth < BinaryFormat.maximumDepth, objectBudget > 0 else { throw .tooComplex }
      guard index >= 0, index < objectCount else { throw .malformed("reference \(index)") }
      let start = try offset(of: index)
      let marker = bytes[start]
      switch marker >> 4 {
      case 0x0:
        switch marker {
        case 0x08: return .boolean(false)
        case 0x09: return .boolean(true)
        default: throw .malformed("singleton \(marker)")
        }
      case 0x1:
        let width = 1 << Int(marker & 0x0F)
        guard width <= 8 else { throw .malformed("integer width") }
        let raw = try unsigned(at: start + 1, width: width)
        return .integer(width == 8 ? Int64(bitPattern: raw) : Int64(raw))
      case 0x2:
        let width = 1 << Int(marker & 0x0F)
        let raw = try unsigned(at: start + 1, width: width)
        switch width {
        case 4: return .real(Double(Float(bitPattern: UInt32(raw))))
        case 8: return .real(Double(bitPattern: raw))
        default: throw .malformed("real width")
        }
      case 0x3:
        guard marker == 0x33 else { throw .malformed("date") }
        return .date(Double(bitPattern: try unsigned(at: start + 1, width: 8)))
      case 0x4:
        let (count, content) = try length(marker: marker, at: start)
        let end = try contentEnd(content, count, 1, "data")
        try spend(count)
        return .data(Array(bytes[content..<end]))
      case 0x5:
        let (count, content) = try length(marker: marker, at: start)
        let end = try contentEnd(content, count, 1, "string")
        try spend(count)
        return .string(String(decoding: bytes[content..<end], as: UTF8.self))
      case 0x6:
        let (count, content) = try length(marker: marker, at: start)
        _ = try contentEnd(content, count, 2, "string")
        try spend(2 * count)
        var units: [UInt16] = []
        units.reserveCapacity(count)
        for unit in 0..<count {
          units.append(UInt16(bytes[content + 2 * unit]) << 8 | UInt16(bytes[content + 2 * unit + 1]))
        }
        return .string(String(decoding: units, as: UTF16.self))
      case 0x8:
        return .uid(try unsigned(at: start + 1, width: Int(marker & 0x0F) + 1))
      case 0xA:
        let (count, content) = try length(marker: marker, at: start)
        _ = try contentEnd(content, count, refWidth, "array")
        var elements: [PropertyList] = []
        for slot in 0..<count {
          let ref = try unsigned(at: content + slot * refWidth, width: refWidth)
          elements.append(try object(Int(clamping: ref), depth: depth + 1))
        }
        return .array(elements)
      case 0xD:
        let (count, content) = try length(marker: marker, at: start)
        _ = try contentEnd(content, count, 2 * refWidth, "dictionary")
        var pairs: [(String, PropertyList)] = []
        for slot in 0..<count {
          let keyRef = try unsigned(at: content + slot * refWidth, width: refWidth)
          let valueRef = try unsigned(at: content + (count + slot) * refWidth, width: refWidth)
          guard case .string(let key) = try object(Int(clamping: keyRef), depth: depth + 1) else {
            throw .malformed("dictionary key is not a string")
          }
          pairs.append((key, try object(Int(clamping: valueRef), depth: depth + 1)))
        }
        return .dictionary(pairs)
      default:
        throw .malformed("marker \(marker)")
      }
    }
  }
}
