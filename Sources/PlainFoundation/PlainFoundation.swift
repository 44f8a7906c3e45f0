import Foundation

/// Foundation's own implementations of the members AppBoxKit declares again.
///
/// AppBoxKit re-exports Foundation and declares `Data.write(to:options:)`,
/// `FileManager.setAttributes(_:ofItemAtPath:)` and others with Foundation's signatures;
/// Swift then picks AppBoxKit's for code that imports AppBoxKit, AppBoxKit's own code
/// included. This module imports Foundation alone, so its calls reach Foundation's.
public enum PlainFoundation {
  /// Foundation's `Data.write(to:options:)`.
  public static func write(_ data: Data, to url: URL, options: Data.WritingOptions) throws {
    try data.write(to: url, options: options)
  }

  /// Foundation's `FileManager.setAttributes(_:ofItemAtPath:)`.
  public static func setAttributes(
    _ attributes: [FileAttributeKey: Any], ofItemAtPath path: String, in fileManager: FileManager
  ) throws {
    try fileManager.setAttributes(attributes, ofItemAtPath: path)
  }

  /// Foundation's `FileManager.attributesOfItem(atPath:)`.
  public static func attributesOfItem(atPath path: String, in fileManager: FileManager) throws -> [FileAttributeKey:
    Any]
  {
    try fileManager.attributesOfItem(atPath: path)
  }

  /// Foundation's `FileManager.createFile(atPath:contents:attributes:)`.
  public static func createFile(
    atPath path: String, contents: Data?, attributes: [FileAttributeKey: Any]?, in fileManager: FileManager
  ) -> Bool {
    fileManager.createFile(atPath: path, contents: contents, attributes: attributes)
  }

  /// Foundation's `URL.setResourceValues(_:)`.
  public static func setResourceValues(_ values: URLResourceValues, of url: inout URL) throws {
    try url.setResourceValues(values)
  }

  /// Foundation's `URL.resourceValues(forKeys:)`.
  public static func resourceValues(forKeys keys: Set<URLResourceKey>, of url: URL) throws -> URLResourceValues {
    try url.resourceValues(forKeys: keys)
  }

  /// Foundation's `FileManager.urls(for:in:)`.
  public static func urls(
    for directory: FileManager.SearchPathDirectory, in domainMask: FileManager.SearchPathDomainMask,
    fileManager: FileManager
  ) -> [URL] {
    fileManager.urls(for: directory, in: domainMask)
  }
}
