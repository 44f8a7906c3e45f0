import AppBoxEvents
import Posix
import SandboxPolicy

/// Why a sandbox could not be set up over a backing directory; nothing was changed.
public enum SandboxSetupError: Error, Sendable, Equatable, CustomStringConvertible {
  /// A system call failed: the backing directory cannot be opened, a fixed name is not a
  /// directory, the tree cannot be read.
  case system(Errno)
  /// The backing root records a default class (``DefaultProtection/attributeName``) that
  /// names no class: its items without a class of their own have an unknown one.
  case unknownDefaultProtection(value: [UInt8])
  /// The backing root's recorded default class cannot be read.
  case unreadableDefaultProtection(Errno)

  public var description: String {
    let name = DefaultProtection.attributeName
    switch self {
    case .system(let error):
      return "\(error)"
    case .unknownDefaultProtection(let value):
      let shown = JSONText.quoted(bytes: value.prefix(UnreadableClassEvent.valueLimit))
      return
        "its \(name) is \(shown), which names no protection class, so the class of its items without one is unknown."
        + " Set it to the class they were created with (setfattr -n \(name) -v CLASS BACKING),"
        + " or remove it (setfattr -x \(name) BACKING) to give them --default-protection"
    case .unreadableDefaultProtection(let error):
      return "cannot read its \(name): \(error)"
    }
  }
}
