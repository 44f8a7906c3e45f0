import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Usage by domain and the purge catalog, checked against the backing tree.
enum DomainBooks {
  static let domains = [
    ("documents", "Documents"), ("caches", "Library/Caches"), ("tmp", "tmp"),
    ("applicationSupport", "Library/Application Support"), ("preferences", "Library/Preferences"),
  ]

  /// Each domain's usage is what `du` counts in its directory, and the purge catalog holds
  /// exactly the backing files with one link in Caches and tmp (none may be open).
  /// - Returns: the figures compared, to compare with another daemon's.
  @discardableResult
  static func expectMatch(_ fixture: MountFixture, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> [String: Int64]
  {
    let status = try Quota.status(fixture.mountpoint)
    var figures: [String: Int64] = [:]
    for (domain, path) in domains {
      let usage = Quota.number(status, "usage." + domain)
      let du = try Quota.du(fixture.backingPath(path))
      #expect(usage == du, "usage of \(domain) \(usage) != du \(du)", sourceLocation: sourceLocation)
      figures["usage." + domain] = usage
    }
    var files = 0
    for (domain, path) in domains where domain == "caches" || domain == "tmp" {
      let (count, bytes) = try singleLinkFiles(fixture.backingPath(path))
      let purgeable = Quota.number(status, "purgeable." + domain)
      #expect(purgeable == bytes, "purgeable in \(domain) \(purgeable) != \(bytes)", sourceLocation: sourceLocation)
      figures["purgeable." + domain] = purgeable
      files += count
    }
    let catalog = Quota.number(status, "purgeableFiles")
    #expect(catalog == Int64(files), "catalog \(catalog) files, backing \(files)", sourceLocation: sourceLocation)
    figures["purgeableFiles"] = catalog
    return figures
  }

  /// Regular files with one link below `path`: how many, and their allocated bytes.
  static func singleLinkFiles(_ path: String) throws -> (count: Int, bytes: Int64) {
    let result = try Command.run("find", [path, "-type", "f", "-links", "1", "-printf", "%b\\n"])
    guard result.status == 0 else { throw FixtureError("find \(path): \(result.error)") }
    let blocks = result.output.split(separator: "\n").compactMap { Int64($0) }
    return (blocks.count, blocks.reduce(0, +) * 512)
  }
}
