import Testing

@testable import SandboxPolicy

@Suite("Backup exclusion value (binary property list)")
struct BackupExclusionTests {
  /// The bytes an iPhone stores in `com.apple.metadata:com_apple_backup_excludeItem`
  /// (`xattr -px` on a file excluded with `isExcludedFromBackup = true`).
  static let appleBytes: [UInt8] = [
    0x62, 0x70, 0x6C, 0x69, 0x73, 0x74, 0x30, 0x30, 0x5F, 0x10, 0x11, 0x63, 0x6F, 0x6D, 0x2E, 0x61,
    0x70, 0x70, 0x6C, 0x65, 0x2E, 0x62, 0x61, 0x63, 0x6B, 0x75, 0x70, 0x64, 0x08, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1C,
  ]

  @Test("Apple's value is the 61 bytes a device writes")
  func appleValue() {
    #expect(BackupExclusion.appleValue.count == 61)
    #expect(BackupExclusion.appleValue == Self.appleBytes)
  }

  @Test("decoding Apple's bytes gives com.apple.backupd")
  func decodeApple() {
    #expect(BinaryPropertyList.decodeASCIIString(Self.appleBytes) == "com.apple.backupd")
  }

  @Test(
    "strings of every length class round-trip",
    arguments: [
      "", "a", "fourteen chars", "fifteen chars!!", String(repeating: "x", count: 300),
      String(repeating: "y", count: 70_000),
    ])
  func roundTrip(_ text: String) {
    let encoded = BinaryPropertyList.encode(asciiString: text)
    #expect(BinaryPropertyList.decodeASCIIString(encoded) == text)
  }

  @Test("a short string uses the one-byte marker")
  func shortMarker() {
    let encoded = BinaryPropertyList.encode(asciiString: "abc")
    #expect(Array(encoded[8..<12]) == [0x53, 0x61, 0x62, 0x63])
    #expect(encoded.count == 8 + 4 + 1 + 32)
  }

  @Test(
    "malformed values decode to nil",
    arguments: [
      [], Array("bplist00".utf8), [0x01], Array(Self.appleBytes.dropLast()),
      Array(Self.appleBytes.prefix(8)) + [0x08] + Array(Self.appleBytes.suffix(33)),
    ])
  func malformed(_ bytes: [UInt8]) {
    #expect(BinaryPropertyList.decodeASCIIString(bytes) == nil)
  }
}
