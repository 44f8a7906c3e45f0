/// A seedable pseudo-random generator (SplitMix64) for reproducible randomized tests.
///
/// Swift's `SystemRandomNumberGenerator` cannot be seeded, and the standard library's
/// `random(in:using:)` algorithms may change between toolchains, so tests draw through
/// ``below(_:)`` and friends, whose output depends only on the seed.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
  private var state: UInt64

  /// A generator whose sequence depends only on `seed`.
  public init(seed: UInt64) { state = seed }

  /// The next 64 random bits (SplitMix64, Steele, Lea and Flood 2014).
  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// A number in `0..<bound` (`bound` > 0; the modulo bias is negligible for small bounds).
  public mutating func below(_ bound: Int) -> Int {
    precondition(bound > 0)
    return Int(next() % UInt64(bound))
  }

  /// A number in `range`.
  public mutating func inRange(_ range: ClosedRange<Int>) -> Int {
    range.lowerBound + below(range.upperBound - range.lowerBound + 1)
  }

  /// True with probability `percent`/100.
  public mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

  /// One element of a non-empty array.
  public mutating func pick<T>(_ choices: [T]) -> T { choices[below(choices.count)] }

  /// `count` random bytes.
  public mutating func bytes(_ count: Int) -> [UInt8] {
    var result = [UInt8]()
    result.reserveCapacity(count)
    while result.count < count {
      var word = next()
      for _ in 0..<min(8, count - result.count) {
        result.append(UInt8(truncatingIfNeeded: word))
        word >>= 8
      }
    }
    return result
  }
}
