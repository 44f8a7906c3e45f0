/// The kind of file-system operation a protection class is checked against (docs/reference.md#data-protection).
public enum ProtectedOperation: Sendable, Hashable, CaseIterable, CustomStringConvertible {
  /// Creating a file whose name did not exist (`create`, `open` with `O_CREAT` creating it).
  case createNew
  /// Opening an existing file (`open`, including `O_CREAT` on a name that exists), or
  /// changing its content by path (`truncate` without a handle).
  case openExisting
  /// Read, write, truncate or fallocate through a handle opened earlier.
  case handleIO
  /// Metadata: stat, readdir, lookup, unlink, rename, link, chmod/chown/utimes, xattrs.
  /// Never refused by data protection.
  case metadata

  /// The name used in events and counters: `createNew`, `openExisting`, `handleIO`,
  /// `metadata`.
  public var name: String {
    switch self {
    case .createNew: "createNew"
    case .openExisting: "openExisting"
    case .handleIO: "handleIO"
    case .metadata: "metadata"
    }
  }

  /// The ``name``.
  public var description: String { name }
}
