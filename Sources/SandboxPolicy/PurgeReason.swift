/// Why a file was purged (docs/reference.md, "Quota and purging").
public enum PurgeReason: String, Sendable, Hashable, CaseIterable {
  /// A write or create needed space that was not free.
  case pressure
  /// Purging was asked for explicitly (free N bytes, or a whole domain).
  case explicit
  /// The file had not been used for longer than an age limit.
  case age
  /// Background purging above the high-water mark.
  case watermark
  /// The capacity was lowered below the usage (`appbox resize`, `appbox pressure`).
  case shrink
}
