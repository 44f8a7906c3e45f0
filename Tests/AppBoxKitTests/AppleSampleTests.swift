import AppBoxKit
import Posix
import Testing

/// The value of extended attribute `name` of `path`, nil when it has none.
private func attribute(_ name: String, of path: String) -> String? {
  // Absent is the meaning: an error reading it is no value.
  (try? Xattr.value(path: path, name: name)).map { String(decoding: $0, as: UTF8.self) }
}

/// Apple's documented snippets (AppleSamples.swift, compiled with only the import line
/// changed) on a mount: the classes they set are the mount's, their `switch`es over
/// `FileProtectionType` work (Foundation on Linux lacks its Equatable), and the backup
/// exclusion is Apple's attribute.
@Suite("Apple's sample code", .timeLimit(.minutes(5)))
struct AppleSampleTests {
  @Test("Data Protection: written complete, read back through the switch, changed and read again")
  func dataProtection() throws {
    let mount = try TestMount()
    let url = URL(fileURLWithPath: mount.path("Documents/secret"))
    #expect(appleWriteProtected(Data("secret".utf8), to: url))
    #expect(try appleProtectionDescription(ofItemAtPath: url.path) == "complete")
    #expect(try appleURLProtectionDescription(url) == "complete")
    try appleSetProtection(.completeUnlessOpen, ofItemAtPath: url.path)
    #expect(try appleProtectionDescription(ofItemAtPath: url.path) == "completeUnlessOpen")
    try appleSetProtection(.none, ofItemAtPath: url.path)
    #expect(try appleProtectionDescription(ofItemAtPath: url.path) == "none")
    #expect(try appleURLProtectionDescription(url) == "none")
    // The mount's own record of it.
    #expect(attribute("user.appbox.protection", of: url.path) == "none")
    try mount.unmount()
  }

  @Test("FileProtectionType compares by its name, in switches and sets")
  func equatable() {
    #expect(FileProtectionType.complete == FileProtectionType(rawValue: "NSFileProtectionComplete"))
    #expect(FileProtectionType.complete != .completeUnlessOpen)
    #expect(Set([FileProtectionType.complete, .complete, .none]).count == 2)
  }

  @Test("backup exclusion: Apple's attribute set on the item, and read back")
  func backupExclusion() throws {
    let mount = try TestMount()
    let downloads = URL(fileURLWithPath: mount.path("Library/Application Support/Downloads"), isDirectory: true)
    try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
    #expect(try !appleIsExcludedFromBackup(downloads))
    try appleExcludeFromBackup(downloads)
    #expect(try appleIsExcludedFromBackup(downloads))
    #expect(attribute("com.apple.metadata:com_apple_backup_excludeItem", of: downloads.path) != nil)
    try mount.unmount()
  }
}
