/// An app's bundle id or an App Group's id on a device mount (docs/reference.md#a-device):
/// a reverse-DNS name, which is also the name of its container's directory.
///
/// Checked so that an id can never leave its directory or collide with AppBox's own names:
/// 1 to ``maximumLength`` bytes (so that AppBox's staging names, which put up to 38 bytes
/// in front of an id, fit a file name), ASCII letters, digits and `-` in at least two
/// components separated by single dots (`com.example.app`, `group.com.example.shared`).
/// So no `/`, no NUL, no `..`, no leading dot (AppBox's staging names start with one).
public struct ContainerIdentifier: Hashable, Comparable, Sendable, CustomStringConvertible {
  /// The id as given.
  public let name: String

  /// The longest id, in bytes: the longest file name (255) less the longest prefix of
  /// AppBox's staging names (``DeviceLayout/longestStagingPrefix``, 38: `.appbox-removing-`,
  /// a removal number of up to 20 digits and `-`). A longer id could be installed but its
  /// container not staged for removal (ENAMETOOLONG), or not even installed.
  public static let maximumLength = 217

  /// Why a text is not an id.
  public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
    /// Nothing was given.
    case empty
    /// More than ``ContainerIdentifier/maximumLength`` bytes.
    case tooLong(Int)
    /// A byte other than an ASCII letter, digit, `-` or `.`.
    case badCharacter(UInt8)
    /// A single component (no dot).
    case notReverseDNS
    /// An empty component: a leading, trailing or doubled dot.
    case emptyComponent

    public var description: String {
      switch self {
      case .empty: "an empty id"
      case .tooLong(let count): "\(count) bytes, longer than \(ContainerIdentifier.maximumLength)"
      case .badCharacter(let byte):
        byte >= 0x21 && byte < 0x7F
          ? "'\(Character(Unicode.Scalar(byte)))' is not a letter, digit, '-' or '.'"
          : "byte 0x\(String(byte, radix: 16)) is not a letter, digit, '-' or '.'"
      case .notReverseDNS: "not a reverse-DNS name (such as com.example.app)"
      case .emptyComponent: "an empty component (a leading, trailing or doubled dot)"
      }
    }
  }

  /// Checks `text`.
  /// - Throws: ``Problem`` when it is not an id.
  public init(validating text: String) throws(Problem) {
    try Self.check(Array(text.utf8))
    name = text
  }

  /// The id a directory entry's name spells, if it is one.
  public init?(bytes: some Collection<UInt8>) {
    let bytes = Array(bytes)
    do throws(Problem) { try Self.check(bytes) } catch { return nil }
    name = String(decoding: bytes, as: UTF8.self)
  }

  /// The id's bytes, as its directory is named.
  public var bytes: [UInt8] { Array(name.utf8) }

  public var description: String { name }

  public static func < (lhs: ContainerIdentifier, rhs: ContainerIdentifier) -> Bool { lhs.name < rhs.name }

  private static func check(_ bytes: [UInt8]) throws(Problem) {
    guard !bytes.isEmpty else { throw .empty }
    guard bytes.count <= maximumLength else { throw .tooLong(bytes.count) }
    var components = 1
    var componentLength = 0
    for byte in bytes {
      switch byte {
      case UInt8(ascii: "."):
        guard componentLength > 0 else { throw .emptyComponent }
        components += 1
        componentLength = 0
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
        componentLength += 1
      default:
        throw .badCharacter(byte)
      }
    }
    guard componentLength > 0 else { throw .emptyComponent }
    guard components >= 2 else { throw .notReverseDNS }
  }
}
