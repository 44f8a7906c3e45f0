import SandboxPolicy
import Synchronization

/// The names of files in Caches and tmp that have more than one link. The purge catalog
/// holds files with one link only (a purge removes one name); when such a file is down to
/// one link again, its remaining name comes from here and it goes back on the catalog.
///
/// Only names made through the mount are known: a file that already had several links
/// when the sandbox was mounted is purgeable again from the next mount on.
final class LinkNames: Sendable {
  /// A name of a file: the catalog's directory and the name in it.
  struct Name: Hashable, Sendable {
    var parent: PurgeCatalog.Parent
    var name: [UInt8]
  }

  /// Lock order: a leaf, never held with the books' lock.
  private let table = Mutex<[UInt64: [Name]]>([:])

  /// A file gains the name `added`; `first` is the name it had until now (unknown: the
  /// file is not followed).
  func linked(ino: UInt64, first: Name?, added: Name) {
    table.withLock { table in
      if let names = table[ino] {
        table[ino] = names + [added]
      } else if let first {
        table[ino] = [first, added]
      }
    }
  }

  /// A file lost the name `name` and has `remaining` links left.
  /// - Returns: the last name, once a file followed here is down to one link.
  func removed(ino: UInt64, _ name: Name, remaining: Int) -> Name? {
    table.withLock { table in
      guard var names = table[ino] else { return nil }
      if let index = names.firstIndex(of: name) { names.remove(at: index) }
      guard remaining <= 1 else {
        table[ino] = names
        return nil
      }
      table[ino] = nil
      return remaining == 1 && names.count == 1 ? names[0] : nil
    }
  }

  /// A name of a file followed here was renamed.
  func renamed(ino: UInt64, from old: Name, to new: Name) {
    table.withLock { table in
      guard var names = table[ino], let index = names.firstIndex(of: old) else { return }
      names[index] = new
      table[ino] = names
    }
  }

  /// Stops following a file (it moved out of Caches and tmp with all its names).
  func forget(ino: UInt64) {
    _ = table.withLock { $0.removeValue(forKey: ino) }
  }
}
