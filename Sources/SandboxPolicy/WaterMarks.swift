/// Usage levels for background purging: above `high` percent of the capacity, purge down
/// to `low` percent (docs/reference.md#quota-and-purging).
public struct WaterMarks: Hashable, Sendable {
  /// Background purging starts when usage is above this share of the capacity.
  public var high: Percentage
  /// Background purging frees space until usage is at or below this share.
  public var low: Percentage

  /// Creates water marks.
  /// - Parameters:
  ///   - high: The level above which purging starts.
  ///   - low: The level purging goes down to; at most `high`.
  /// - Throws: `WaterMarks.Error.lowAboveHigh` if `low` is above `high`.
  public init(high: Percentage, low: Percentage) throws(WaterMarks.Error) {
    guard low <= high else { throw .lowAboveHigh(low: low, high: high) }
    self.high = high
    self.low = low
  }

  /// Why water marks are invalid.
  public enum Error: Swift.Error, Equatable, Sendable, CustomStringConvertible {
    /// The low mark is above the high mark.
    case lowAboveHigh(low: Percentage, high: Percentage)

    /// A message that says what was wrong and what to write instead.
    public var description: String {
      switch self {
      case .lowAboveHigh(let low, let high):
        return "low-water mark \(low) is above high-water mark \(high): "
          + "give a low mark at or below the high mark, e.g. high 90% and low 80%"
      }
    }
  }

  /// The bytes to purge in the background: when usage is above the high mark, enough to
  /// bring it down to the low mark; otherwise 0.
  /// - Parameter ledger: The current quota.
  /// - Returns: The bytes to free, ≥ 0.
  public func needsBackgroundPurge(_ ledger: QuotaLedger) -> Int64 {
    let used = ledger.used
    guard used > high.of(ledger.capacity) else { return 0 }
    return max(0, used - low.of(ledger.capacity))
  }
}
