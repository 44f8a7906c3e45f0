import SandboxPolicy

/// SHA-1 (FIPS 180-4), for the file ids of an iOS backup: `SHA-1("<domain>-<path>")`.
///
/// Not for security: iOS names backed-up files this way, and SHA-1 is what readers
/// recompute. Pure Swift, since Foundation on Linux has no digest.
public struct SHA1: Sendable {
  private var state: (UInt32, UInt32, UInt32, UInt32, UInt32) = (
    0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0
  )
  private var pending: [UInt8] = []
  private var length: UInt64 = 0

  /// A digest with no input yet.
  public init() { pending.reserveCapacity(64) }

  /// The digest of `bytes`.
  public static func digest(_ bytes: some Sequence<UInt8>) -> [UInt8] {
    var sha = SHA1()
    sha.update(bytes)
    return sha.finish()
  }

  /// The digest of `bytes` as 40 lowercase hex digits.
  public static func hexDigest(_ bytes: some Sequence<UInt8>) -> String {
    JSONText.hex(digest(bytes))
  }

  /// Adds `bytes` to the input.
  public mutating func update(_ bytes: some Sequence<UInt8>) {
    for byte in bytes {
      pending.append(byte)
      length &+= 1
      if pending.count == 64 {
        compress(pending)
        pending.removeAll(keepingCapacity: true)
      }
    }
  }

  /// The 20-byte digest of everything added.
  public mutating func finish() -> [UInt8] {
    let bits = length &* 8
    pending.append(0x80)
    while pending.count % 64 != 56 { pending.append(0) }
    for shift in stride(from: 56, through: 0, by: -8) {
      pending.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
    }
    for start in stride(from: 0, to: pending.count, by: 64) { compress(pending[start..<start + 64]) }
    pending.removeAll()
    var out: [UInt8] = []
    for word in [state.0, state.1, state.2, state.3, state.4] {
      for shift in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: word >> UInt32(shift))) }
    }
    return out
  }

  private mutating func compress(_ block: ArraySlice<UInt8>) {
    var w = [UInt32](repeating: 0, count: 80)
    let base = block.startIndex
    for i in 0..<16 {
      w[i] =
        UInt32(block[base + 4 * i]) << 24 | UInt32(block[base + 4 * i + 1]) << 16
        | UInt32(block[base + 4 * i + 2]) << 8 | UInt32(block[base + 4 * i + 3])
    }
    for i in 16..<80 { w[i] = rotate(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1) }
    var (a, b, c, d, e) = state
    for i in 0..<80 {
      let f: UInt32
      let k: UInt32
      switch i {
      case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
      case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
      case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
      default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
      }
      let t = rotate(a, 5) &+ f &+ e &+ k &+ w[i]
      (e, d, c, b, a) = (d, c, rotate(b, 30), a, t)
    }
    state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d, state.4 &+ e)
  }

  private mutating func compress(_ block: [UInt8]) { compress(block[...]) }

  private func rotate(_ x: UInt32, _ n: UInt32) -> UInt32 { x << n | x >> (32 - n) }
}
