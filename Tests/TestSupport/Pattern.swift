/// Bytes that do not repeat (so a comparison or a checksum means something), the same for
/// the same `count` and `seed` (xorshift64).
public func pattern(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
  var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
  var bytes = [UInt8](repeating: 0, count: count)
  for index in 0..<count {
    state ^= state << 13
    state ^= state >> 7
    state ^= state << 17
    bytes[index] = UInt8(truncatingIfNeeded: state)
  }
  return bytes
}
