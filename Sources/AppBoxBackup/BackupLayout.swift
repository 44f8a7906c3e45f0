/// How an unencrypted iOS backup names what it holds: `Manifest.db`, the plists, and each
/// file's bytes at `<first two hex digits of its id>/<id>`.
public enum BackupLayout {
  /// The SQLite database of the backup's items.
  public static let database = "Manifest.db"
  /// The property list that says, among other things, whether the backup is encrypted.
  public static let manifest = "Manifest.plist"

  /// A file's id in the backup: SHA-1 of `<domain>-<relative path>`, in hex.
  public static func fileID(domain: String, relativePath: [UInt8]) -> String {
    SHA1.hexDigest(Array(domain.utf8) + [UInt8(ascii: "-")] + relativePath)
  }

  /// Where a file's bytes lie in the backup: `<first two hex digits>/<fileID>`.
  public static func contentPath(fileID: String) -> String { String(fileID.prefix(2)) + "/" + fileID }
}
