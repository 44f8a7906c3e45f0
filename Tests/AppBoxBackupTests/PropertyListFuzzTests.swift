import PropertyLists
import SandboxPolicy
import Testing

@testable import AppBoxBackup

/// Hostile property lists: the readers never trap, never loop, never blow memory up;
/// every input decodes or is refused with a ``PropertyListError``.
@Suite("Property lists: hostile input")
struct PropertyListFuzzTests {
  /// The `bplist00` trailer of a plist whose objects end at `objectsEnd`: offset size,
  /// reference size, object count, root object, table offset.
  static func trailer(offsetSize: UInt8, refSize: UInt8, count: UInt64, root: UInt64, table: UInt64) -> [UInt8] {
    func be(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) } }
    return [0, 0, 0, 0, 0, 0, offsetSize, refSize] + be(count) + be(root) + be(table)
  }

  @Test("a table offset near 2^64 is malformed, not an arithmetic overflow")
  func tableOffsetOverflow() {
    let bytes =
      Array("bplist00".utf8) + [0x08]
      + Self.trailer(offsetSize: 1, refSize: 1, count: 1, root: 0, table: 0xFFFF_FFFF_FFFF_FFFF)
    #expect(throws: PropertyListError.self) { try PropertyList(decoding: bytes) }
  }

  @Test(
    "trailer fields at their extremes are refused", arguments: [UInt64.max, UInt64.max / 2, 1 << 63, 1 << 62, 9, 0])
  func trailerExtremes(_ value: UInt64) {
    let objects = Array("bplist00".utf8) + [0x08, 0x09]
    for (count, root, table) in [(value, 0, 10), (2, value, 10), (2, 0, value), (value, value, value)]
      as [(UInt64, UInt64, UInt64)]
    {
      for width: UInt8 in [1, 2, 8] {
        let bytes =
          objects + [8, 9] + Self.trailer(offsetSize: width, refSize: width, count: count, root: root, table: table)
        _ = try? PropertyList(decoding: bytes)  // decodes or throws: either is fine, a trap is not
      }
    }
  }

  @Test("one string referenced over and over is too much to decode, not gigabytes of memory")
  func expansionBomb() {
    // Object 0: an array of 1000 references to object 1, a string of 128 KiB: 125 MiB
    // decoded from 129 KiB, in fewer objects than the reader's object budget.
    let references = 1000
    var bytes = Array("bplist00".utf8)
    let arrayOffset = bytes.count
    bytes += [0xAF, 0x11, UInt8(references >> 8), UInt8(references & 0xFF)] + [UInt8](repeating: 1, count: references)
    let stringOffset = bytes.count
    bytes += [0x5F, 0x12, 0x00, 0x02, 0x00, 0x00] + [UInt8](repeating: 0x41, count: 1 << 17)
    let table = bytes.count
    bytes += [
      UInt8(arrayOffset >> 24), UInt8(arrayOffset >> 16 & 0xFF), UInt8(arrayOffset >> 8 & 0xFF),
      UInt8(arrayOffset & 0xFF),
    ]
    bytes += [
      UInt8(stringOffset >> 24), UInt8(stringOffset >> 16 & 0xFF), UInt8(stringOffset >> 8 & 0xFF),
      UInt8(stringOffset & 0xFF),
    ]
    bytes += Self.trailer(offsetSize: 4, refSize: 1, count: 2, root: 0, table: UInt64(table))
    var refusal: PropertyListError?
    do { _ = try PropertyList(decoding: bytes) } catch { refusal = error }
    #expect(refusal == .tooComplex)  // not the value: 125 MiB of text
  }

  /// A small deterministic generator (xorshift64*), so a failure names its case.
  struct Generator {
    var state: UInt64
    mutating func next() -> UInt64 {
      state ^= state >> 12
      state ^= state << 25
      state ^= state >> 27
      return state &* 0x2545_F491_4F6C_DD1D
    }
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(bound, 1))) }
  }

  /// Values that matter to a reader: zero, small, boundaries of each width, the top.
  static let interesting: [UInt64] = [
    0, 1, 2, 7, 8, 14, 15, 16, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0xFFFF, 0x1_0000, 0x7FFF_FFFF, 0xFFFF_FFFF,
    1 << 32, 1 << 62, 1 << 63, UInt64.max - 8, UInt64.max,
  ]

  /// One mutation of `input`: a byte flipped, set or inserted, a range cut or repeated, a
  /// big-endian field overwritten with an interesting value, a trailer field changed.
  static func mutate(_ input: [UInt8], _ random: inout Generator) -> [UInt8] {
    var bytes = input
    for _ in 0...random.below(3) {
      guard !bytes.isEmpty else { return bytes }
      let at = random.below(bytes.count)
      switch random.below(8) {
      case 0: bytes[at] ^= UInt8(1 << random.below(8))
      case 1: bytes[at] = UInt8(truncatingIfNeeded: random.next())
      case 2: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: at)
      case 3: bytes.removeSubrange(at..<min(bytes.count, at + 1 + random.below(16)))
      case 4:
        let end = min(bytes.count, at + 1 + random.below(32))
        bytes.insert(contentsOf: bytes[at..<end], at: random.below(bytes.count))
      case 5, 6:
        // A field of 1, 2, 4 or 8 bytes anywhere, or one of the trailer's.
        let width = 1 << random.below(4)
        let start = fieldStart(random.below(2) == 0, bytes.count, at, width, &random)
        let value = interesting[random.below(interesting.count)]
        for index in 0..<width where start + index < bytes.count && start + index >= 0 {
          bytes[start + index] = UInt8(truncatingIfNeeded: value >> UInt64(8 * (width - 1 - index)))
        }
      default: bytes = Array(bytes.prefix(random.below(bytes.count + 1)))
      }
    }
    return bytes
  }

  /// Where a field goes: anywhere, or at one of the trailer's fields.
  private static func fieldStart(_ anywhere: Bool, _ count: Int, _ at: Int, _ width: Int, _ random: inout Generator)
    -> Int
  {
    if anywhere || count < 32 { return at }
    return [count - 26, count - 25, count - 24, count - 16, count - 8][random.below(5)]
  }

  /// Seeds: plists like those a backup holds, in both formats, and MBFile archives.
  static var seeds: [[UInt8]] {
    let record = BackupFileRecord(
      relativePath: Array("Documents/a".utf8), kind: .file, mode: 0o100644, userID: 501, groupID: 501, size: 5,
      inode: 7, birth: 1, lastModified: 2, lastStatusChange: 3, protectionClass: 3,
      extendedAttributes: [(Array("user.tag".utf8), [1, 2]), (Array("com.apple.MobileBackup".utf8), [1])])
    let link = BackupFileRecord(
      relativePath: Array("Documents/l".utf8), kind: .symlink, mode: 0o120777, userID: 0, groupID: 0, size: 0,
      inode: 8, birth: 1, lastModified: 2, lastStatusChange: 3, protectionClass: 0, target: Array("a".utf8))
    let plist = PropertyList.dictionary([
      ("IsEncrypted", .boolean(false)), ("Version", .string("10.0")), ("Date", .date(700_000_000)),
      ("List", .array([.integer(-1), .integer(1 << 40), .real(0.5), .data([1, 2, 3]), .uid(3), .string("ünï")])),
      ("Nested", .dictionary([("a", .array([.array([.dictionary([])])]))])),
    ])
    return [
      record.archive(), link.archive(), plist.encoded(as: .binary), plist.encoded(as: .xml),
      BackupExclusion.appleValue,
    ]
  }

  @Test("4,000 mutated plists and archives, seeded: each decodes or is refused, none traps")
  func mutatedInputs() {
    var random = Generator(state: 0x5EED_0F_A99B0C5)
    let seeds = Self.seeds
    var refused = 0
    for round in 0..<4000 {
      let seed = seeds[round % seeds.count]
      let input = Self.mutate(seed, &random)
      do {
        _ = try PropertyList(decoding: input)
      } catch {
        refused += 1
      }
      // The archive reader over the same bytes: records and their attribute tables.
      _ = try? BackupFileRecord.unarchive(input, relativePath: Array("Documents/a".utf8), flags: 1)
    }
    #expect(refused > 100, "the mutations reached the readers' checks")
  }
}
