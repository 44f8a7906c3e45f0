import Foundation
import PlainFoundation

extension FileManager {
  /// Foundation's `urls(for:in:)`; in a program started by `appbox run`,
  /// `.libraryDirectory` in the user domain is the container's `Library` (Foundation on
  /// Linux has none). The other directories come from Foundation, which `appbox run`
  /// points into the container through the environment.
  public func urls(for directory: FileManager.SearchPathDirectory, in domainMask: FileManager.SearchPathDomainMask)
    -> [URL]
  {
    if directory == .libraryDirectory, domainMask.contains(.userDomainMask), let container = AppBoxContainer.current {
      let library = URL(fileURLWithPath: container.root + "/Library", isDirectory: true)
      return [library]
        + PlainFoundation.urls(for: directory, in: domainMask.subtracting(.userDomainMask), fileManager: self)
    }
    return PlainFoundation.urls(for: directory, in: domainMask, fileManager: self)
  }
}
