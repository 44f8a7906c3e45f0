import Foundation

/// The stored properties of Foundation's `URLResourceValues` on Linux (swift-corelibs-
/// foundation, Swift 6.3): the values read, and the keys to set.
private struct ResourceValuesLayout {
  var values: [URLResourceKey: Any]
  var keys: Set<URLResourceKey>
}

extension URLResourceValues {
  /// Whether `URLResourceValues` is laid out as ``ResourceValuesLayout`` (checked once, by
  /// reflection: property names, types and size), so that values for keys Foundation does
  /// not know can be stored in it.
  private static let layoutMatches: Bool = {
    let children = Array(Mirror(reflecting: URLResourceValues()).children)
    return children.count == 2 && children[0].label == "_values" && children[0].value is [URLResourceKey: Any]
      && children[1].label == "_keys" && children[1].value is Set<URLResourceKey>
      && MemoryLayout<URLResourceValues>.size == MemoryLayout<ResourceValuesLayout>.size
      && MemoryLayout<URLResourceValues>.alignment == MemoryLayout<ResourceValuesLayout>.alignment
  }()

  /// Stores `value` as the value read for `key` (readable through `allValues` and the
  /// typed properties). Foundation offers no way to add a value for a key it has no
  /// property for; if its layout ever differs from the one checked, the value is left out
  /// (the property reads nil) rather than written blindly.
  mutating func appBoxSet(_ key: URLResourceKey, _ value: Any) {
    guard Self.layoutMatches else { return }
    // Safe: the layout was checked above (names, types, size and alignment).
    withUnsafeMutablePointer(to: &self) { pointer in
      pointer.withMemoryRebound(to: ResourceValuesLayout.self, capacity: 1) { $0.pointee.values[key] = value }
    }
  }
}
