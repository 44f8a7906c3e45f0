import CPosixShim

/// Linux-only flags that Swift's Glibc module does not export.
public enum Linux {
  /// `O_PATH`: a descriptor that names an inode without opening it for I/O.
  public static let openPath = cposix_o_path()
  /// `O_DIRECT`.
  public static let openDirect = cposix_o_direct()
  /// `O_NOATIME`.
  public static let openNoAccessTime = cposix_o_noatime()
  /// `AT_EMPTY_PATH`.
  public static let atEmptyPath = cposix_at_empty_path()
  /// `RENAME_NOREPLACE`.
  public static let renameNoReplace = cposix_rename_noreplace()
  /// `RENAME_EXCHANGE`.
  public static let renameExchange = cposix_rename_exchange()
  /// `FALLOC_FL_KEEP_SIZE`.
  public static let fallocKeepSize = cposix_falloc_keep_size()
  /// `FALLOC_FL_PUNCH_HOLE`.
  public static let fallocPunchHole = cposix_falloc_punch_hole()
  /// `FALLOC_FL_ZERO_RANGE`.
  public static let fallocZeroRange = cposix_falloc_zero_range()
  /// `FALLOC_FL_INSERT_RANGE`.
  public static let fallocInsertRange = cposix_falloc_insert_range()
  /// `SEEK_DATA`.
  public static let seekData = cposix_seek_data()
  /// `SEEK_HOLE`.
  public static let seekHole = cposix_seek_hole()
  /// `UTIME_NOW`.
  public static let utimeNow = cposix_utime_now()
  /// `UTIME_OMIT`.
  public static let utimeOmit = cposix_utime_omit()
  /// `EXT4_SUPER_MAGIC`: `f_type` of ext4 (and of ext2 and ext3, which share it).
  public static let ext4SuperMagic = 0xEF53
  /// `TMPFS_MAGIC`: `f_type` of tmpfs.
  public static let tmpfsMagic = 0x0102_1994
}
