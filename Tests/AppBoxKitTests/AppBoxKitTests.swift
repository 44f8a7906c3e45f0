// Imports AppBoxKit in place of Foundation, as a user's file does.
import AppBoxKit
import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// AppBoxKit called in this process (no `appbox run`: the mount is found from the path),
/// against a real mount and against a plain directory.
@Suite("AppBoxKit", .serialized, .timeLimit(.minutes(5)))
struct AppBoxKitTests {
  @Test("on a plain directory: plain Foundation (writes work, the Apple-only values read nil, no attributes)")
  func plainDirectory() throws {
    let directory = try TemporaryDirectory()
    let file = URL(fileURLWithPath: directory.path + "/file")
    try Data("x".utf8).write(to: file, options: [.atomic, .completeFileProtection])
    #expect(try Data(contentsOf: file) == Data("x".utf8))
    #expect(try FileManager.default.attributesOfItem(atPath: file.path)[.protectionKey] == nil)
    try FileManager.default.setAttributes([.protectionKey: FileProtectionType.complete], ofItemAtPath: file.path)
    var url = file
    var values = URLResourceValues()
    values.isExcludedFromBackup = true
    try url.setResourceValues(values)
    let read = try url.resourceValues(forKeys: [
      .isExcludedFromBackupKey, .fileProtectionKey, .volumeAvailableCapacityForImportantUsageKey,
    ])
    #expect(read.isExcludedFromBackup == nil)
    #expect(read.fileProtection == nil)
    let free = try #require(read.volumeAvailableCapacityForImportantUsage)
    var vfs = statvfs()
    #expect(statvfs(directory.path, &vfs) == 0)
    let statfsFree = Int64(vfs.f_bavail) * Int64(vfs.f_frsize)
    #expect(abs(free - statfsFree) < 64 << 20, "the volume's free bytes")
    #expect(throws: Errno.noData) { try Xattr.value(path: file.path, name: "user.appbox.protection") }
    #expect(UIApplication.shared.isProtectedDataAvailable)
  }

  @Test(
    "Data.write's protection options give the file its class, atomic or not",
    arguments: [
      (Data.WritingOptions.completeFileProtection, "complete"),
      (.completeFileProtectionUnlessOpen, "completeUnlessOpen"),
      (.completeFileProtectionUntilFirstUserAuthentication, "completeUntilFirstUserAuthentication"),
      (.completeFileProtectionWhenUserInactive, "completeWhenUserInactive"), (.noFileProtection, "none"),
    ])
  func writingOptions(_ option: Data.WritingOptions, _ name: String) throws {
    let mount = try TestMount()
    for atomic in [true, false] {
      let file = URL(fileURLWithPath: mount.path("Documents/\(name)-\(atomic)"))
      try Data(name.utf8).write(to: file, options: atomic ? [option, .atomic] : option)
      #expect(try mount.backingXattr("Documents/\(name)-\(atomic)", "user.appbox.protection") == name)
      #expect(
        (try FileManager.default.attributesOfItem(atPath: file.path)[.protectionKey] as? FileProtectionType)?.rawValue
          == ProtectionNames.foundation[name])
      #expect(
        try file.resourceValues(forKeys: [.fileProtectionKey]).fileProtection?.rawValue == ProtectionNames.url[name])
    }
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: mount.path("Documents")).count == 2, "no temporary left")
    try mount.unmount()
  }

  @Test("a directory's class (setAttributes) applies to new items; createFile honours .protectionKey")
  func directoryClass() throws {
    let mount = try TestMount()
    let directory = mount.path("Documents/secrets")
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
    try FileManager.default.setAttributes([.protectionKey: FileProtectionType.complete], ofItemAtPath: directory)
    try Data("a".utf8).write(to: URL(fileURLWithPath: directory + "/a"))
    #expect(
      (try FileManager.default.attributesOfItem(atPath: directory + "/a")[.protectionKey] as? FileProtectionType)?
        .rawValue == "NSFileProtectionComplete")
    #expect(
      FileManager.default.createFile(
        atPath: mount.path("Documents/b"), contents: Data("b".utf8),
        attributes: [.protectionKey: FileProtectionType.none]))
    #expect(try mount.backingXattr("Documents/b", "user.appbox.protection") == "none")
    #expect(try Data(contentsOf: URL(fileURLWithPath: mount.path("Documents/b"))) == Data("b".utf8))
    try mount.unmount()
  }

  @Test("a symlink whose target is missing reads its attributes as Foundation does, without a class")
  func danglingSymlink() throws {
    let mount = try TestMount()
    let link = mount.path("Documents/link")
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "missing")
    let attributes = try FileManager.default.attributesOfItem(atPath: link)
    #expect(attributes[.type] as? FileAttributeType == .typeSymbolicLink)
    #expect(attributes[.protectionKey] == nil)
    #expect(try URL(fileURLWithPath: link).resourceValues(forKeys: [.fileProtectionKey]).fileProtection == nil)
    try mount.unmount()
  }

  @Test("isExcludedFromBackup: Apple's attribute and value, effective through ancestors, removed on false")
  func backupExclusion() throws {
    let mount = try TestMount()
    var folder = URL(fileURLWithPath: mount.path("Library/Application Support/Downloads"), isDirectory: true)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
    let inner = folder.appendingPathComponent("file")
    try Data().write(to: inner)
    #expect(try inner.resourceValues(forKeys: [.isExcludedFromBackupKey]).isExcludedFromBackup == false)
    var values = URLResourceValues()
    values.isExcludedFromBackup = true
    try folder.setResourceValues(values)
    let appleName = "user.appbox.x.com.apple.metadata:com_apple_backup_excludeItem"
    let stored = try mount.backingXattrBytes("Library/Application Support/Downloads", appleName)
    #expect(stored.count == 61 && stored.starts(with: Array("bplist00_\u{10}\u{11}com.apple.backupd".utf8)))
    #expect(try inner.resourceValues(forKeys: [.isExcludedFromBackupKey]).isExcludedFromBackup == true)
    values.isExcludedFromBackup = false
    try folder.setResourceValues(values)
    #expect(try inner.resourceValues(forKeys: [.isExcludedFromBackupKey]).isExcludedFromBackup == false)
    #expect(throws: (any Error).self) {
      try mount.backingXattrBytes("Library/Application Support/Downloads", appleName)
    }
    try mount.unmount()
  }

  @Test("the capacity keys read the mount's important and opportunistic capacity")
  func capacity() throws {
    let mount = try TestMount(["--capacity", "64M"])
    try Data(count: 1 << 20).write(to: URL(fileURLWithPath: mount.path("Library/Caches/c")))
    // The kernel sends the close's release, at which the daemon measures the file, after
    // close(2) has returned: the figures may move once between two reads. Read until the
    // keys and the mount's attributes agree (a wrong reading never does).
    var important: Int64 = 0
    var opportunistic: Int64 = 0
    var agreed = false
    let deadline = Date().addingTimeInterval(10)
    repeat {
      let values = try URL(fileURLWithPath: mount.path("Documents")).resourceValues(forKeys: [
        .volumeAvailableCapacityForImportantUsageKey, .volumeAvailableCapacityForOpportunisticUsageKey,
      ])
      important = try #require(values.volumeAvailableCapacityForImportantUsage)
      opportunistic = try #require(values.volumeAvailableCapacityForOpportunisticUsage)
      let (importantAttribute, opportunisticAttribute) = (
        try mount.rootXattr("user.appbox.available-important"),
        try mount.rootXattr("user.appbox.available-opportunistic")
      )
      agreed = String(important) == importantAttribute && String(opportunistic) == opportunisticAttribute
    } while !agreed && Date() < deadline
    #expect(agreed, "the keys read \(important) and \(opportunistic), the mount's attributes other figures")
    #expect(important > 60 << 20 && important <= 64 << 20, "the 1 MiB cache file is purgeable: still counted")
    #expect(opportunistic < important - (1 << 19), "the cache file is not opportunistic space")
    try mount.unmount()
  }

  @Test("while LOCKED a class complete write is refused as Foundation refuses EPERM, and changes nothing")
  func lockedWrite() throws {
    let mount = try TestMount(["--grace", "0"])
    let file = URL(fileURLWithPath: mount.path("Documents/doc"))
    try Data("before".utf8).write(to: file, options: .noFileProtection)
    try mount.appbox(["lock", mount.mountpoint])
    for options in [Data.WritingOptions.completeFileProtection, [.completeFileProtection, .atomic]] {
      do {
        try Data("after".utf8).write(to: file, options: options)
        Issue.record("the write was not refused")
      } catch let error as CocoaError {
        #expect(error.code == .fileWriteNoPermission)
        #expect((error.underlying as NSError?)?.code == Int(EPERM))
      }
      do {
        try Data("new".utf8).write(to: URL(fileURLWithPath: mount.path("Documents/new")), options: options)
        Issue.record("the new file was not refused")
      } catch let error as CocoaError {
        #expect(error.code == .fileWriteNoPermission)
      }
    }
    #expect(try Data(contentsOf: file) == Data("before".utf8))
    #expect(try FileManager.default.contentsOfDirectory(atPath: mount.path("Documents")) == ["doc"])
    #expect(throws: CocoaError.self) {
      try FileManager.default.setAttributes([.protectionKey: FileProtectionType.complete], ofItemAtPath: file.path)
    }
    try mount.unmount()
  }
}

/// Apple's names for each class, by AppBox's name.
enum ProtectionNames {
  static let foundation = [
    "complete": "NSFileProtectionComplete", "completeUnlessOpen": "NSFileProtectionCompleteUnlessOpen",
    "completeUntilFirstUserAuthentication": "NSFileProtectionCompleteUntilFirstUserAuthentication",
    "completeWhenUserInactive": "NSFileProtectionCompleteWhenUserInactive", "none": "NSFileProtectionNone",
  ]
  static let url = foundation.mapValues { $0.replacingOccurrences(of: "NSFile", with: "NSURLFile") }
}
