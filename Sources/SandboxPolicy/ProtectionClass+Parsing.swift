// MARK: - Parsing

extension ProtectionClass {
  /// Parses a protection class from raw bytes, e.g. an extended attribute value.
  ///
  /// Accepted spellings, compared byte for byte:
  /// - the canonical names (`complete`, `completeUnlessOpen`, …), case-sensitive;
  /// - the Foundation names (`NSFileProtectionComplete`, …), case-sensitive;
  /// - the letters `A`, `B`, `C`, `CX`, `D`, in any ASCII case;
  /// - Apple's numbers `1` (A), `2` (B), `3` (C), `4` (D), `7` (CX), without sign or
  ///   leading zeros.
  ///
  /// One trailing NUL (`0x00`) or newline (`0x0A`) is ignored, as left by `setfattr` or
  /// `echo`. Anything else, including surrounding spaces, yields `nil`.
  ///
  /// - Parameter bytes: the value to parse.
  public init?(parsing bytes: some Collection<UInt8>) {
    var value = Array(bytes)
    if let last = value.last, last == 0x00 || last == 0x0A {
      value.removeLast()
    }
    guard let parsed = Self.match(value) else { return nil }
    self = parsed
  }

  /// Parses a protection class from a string; see the byte-collection `init(parsing:)`
  /// for the accepted spellings.
  ///
  /// - Parameter text: the value to parse.
  public init?(parsing text: String) {
    self.init(parsing: text.utf8)
  }

  /// Matches one spelling, already stripped of its tolerated terminator.
  private static func match(_ value: [UInt8]) -> ProtectionClass? {
    switch value.count {
    case 0:
      return nil
    case 1:
      switch value[0] {
      case UInt8(ascii: "A"), UInt8(ascii: "a"), UInt8(ascii: "1"): return .complete
      case UInt8(ascii: "B"), UInt8(ascii: "b"), UInt8(ascii: "2"): return .completeUnlessOpen
      case UInt8(ascii: "C"), UInt8(ascii: "c"), UInt8(ascii: "3"):
        return .completeUntilFirstUserAuthentication
      case UInt8(ascii: "D"), UInt8(ascii: "d"), UInt8(ascii: "4"): return ProtectionClass.none
      case UInt8(ascii: "7"): return .completeWhenUserInactive
      default: return nil
      }
    case 2:
      let isC = value[0] == UInt8(ascii: "C") || value[0] == UInt8(ascii: "c")
      let isX = value[1] == UInt8(ascii: "X") || value[1] == UInt8(ascii: "x")
      return isC && isX ? .completeWhenUserInactive : nil
    default:
      for candidate in allCases
      where value.elementsEqual(candidate.name.utf8)
        || value.elementsEqual(candidate.foundationName.utf8)
      {
        return candidate
      }
      return nil
    }
  }
}
