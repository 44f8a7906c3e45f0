import Testing

@testable import SandboxPolicy

@Suite("ByteCount parsing and formatting")
struct ByteCountTests {
  static let accepted: [(String, Int64)] = [
    ("4096", 4096), ("0", 0), ("10K", 10_240), ("10k", 10_240), ("500M", 500 << 20),
    ("2G", 2 << 30), ("1.5G", 3 << 29), ("1T", 1 << 40), ("1P", 1 << 50), ("2GiB", 2 << 30),
    ("2GB", 2 << 30), ("2gb", 2 << 30), ("2Gi", 2 << 30), ("4096B", 4096), ("1KiB", 1024),
    (" 500 M ", 500 << 20), ("1.3K", 1331), ("0.5K", 512), ("8191P", 8191 << 50),
  ]

  @Test(arguments: accepted)
  func accepts(_ text: String, _ bytes: Int64) throws {
    #expect(try ByteCount.parse(text) == ByteCount(bytes))
  }

  static let rejected: [(String, ByteCount.ParseError)] = [
    ("", .empty), ("   ", .empty), ("-1", .invalidNumber("-1")), ("M", .invalidNumber("M")),
    (".5G", .invalidNumber(".5G")), ("1.G", .invalidNumber("1.G")),
    ("12X", .unknownUnit(text: "12X", unit: "X")), ("1KB B", .unknownUnit(text: "1KB B", unit: "KB B")),
    ("1iB", .unknownUnit(text: "1iB", unit: "iB")), ("1.5", .fractionalBytes("1.5")),
    ("1.5B", .fractionalBytes("1.5B")), ("8192P", .overflow("8192P")),
    ("99999999999999999999", .overflow("99999999999999999999")),
    ("9223372036854775807K", .overflow("9223372036854775807K")),
  ]

  @Test(arguments: rejected)
  func rejects(_ text: String, _ error: ByteCount.ParseError) {
    #expect(throws: error) { try ByteCount.parse(text) }
  }

  @Test func errorMessagesSayWhatToDo() {
    let message = ByteCount.ParseError.unknownUnit(text: "12X", unit: "X").description
    #expect(message.contains("'12X'"))
    #expect(message.contains("500M"))
  }

  static let formatted: [(Int64, String)] = [
    (0, "0 B"), (512, "512 B"), (1023, "1023 B"), (1024, "1 KiB"), (10_240, "10 KiB"),
    (1536, "1.5 KiB"), (3 << 29, "1.5 GiB"), (1 << 40, "1 TiB"), ((1 << 20) - 1, "1 MiB"),
    (-1536, "-1.5 KiB"), (Int64.max, "8 EiB"), (1_288_490_189, "1.2 GiB"),
  ]

  @Test(arguments: formatted)
  func formats(_ bytes: Int64, _ text: String) {
    #expect(ByteCount(bytes).formatted == text)
  }
}
