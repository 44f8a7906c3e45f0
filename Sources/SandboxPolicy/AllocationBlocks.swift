/// The quota's unit of allocation: what a reservation is rounded to before the real
/// change is measured (`st_blocks * 512`) and settled. One place, so that every path
/// rounds alike.
public enum AllocationBlocks {
  /// The block size AppBox reserves in (and reports through `statfs`).
  public static let size: Int64 = 4096

  /// `bytes` rounded up to whole blocks (0 for 0 or less).
  public static func roundUp(_ bytes: Int64) -> Int64 {
    bytes <= 0 ? 0 : (bytes + size - 1) / size * size
  }

  /// `bytes` rounded down to whole blocks (0 for less than a block).
  public static func roundDown(_ bytes: Int64) -> Int64 {
    bytes <= 0 ? 0 : bytes / size * size
  }

  /// What an allocation of `bytes` may cost with the backing filesystem's own metadata
  /// for it (an extent or indirect block): the bytes in whole blocks, plus one.
  public static func withMetadata(_ bytes: Int64) -> Int64 {
    roundUp(bytes) + size
  }
}
