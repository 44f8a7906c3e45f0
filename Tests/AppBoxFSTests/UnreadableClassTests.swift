import FilesystemInterface
import Foundation
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A stored class that names no class, or cannot be read, counts as the strictest class
/// (`complete`): readable while unlocked, refused while locked, reported once per file.
@Suite("Classes that cannot be used fail closed")
struct UnreadableClassTests {
  /// Values the parser refuses (`complete` plus one trailing NUL or newline is accepted).
  static let badValues: [[UInt8]] = [
    Array("complete ".utf8), Array("Complete".utf8), Array("01".utf8), [0xFF], Array("comp\0lete".utf8), [],
    Array("completeUnlessOpen\n\n".utf8),
  ]

  static let attributes = [AppBoxAttribute.protection.name, AppBoxAttribute.inheritedProtectionName]

  /// A sandbox whose backing directory held, before the mount, `Documents/f` (10 bytes)
  /// with `value` stored under `attribute`, as another program could leave it.
  static func sandbox(with value: [UInt8]?, in attribute: String) throws -> Sandbox {
    try Sandbox(prepare: { backing in
      try Sys.mkdir(backing + "/Documents", 0o755)
      try Sys.replaceFile(backing + "/Documents/f", with: Array("0123456789".utf8), mode: 0o644)
      if let value { try Xattr.set(path: backing + "/Documents/f", name: attribute, value: value) }
    })
  }

  /// The `unreadableClass` events, decoded.
  static func reports(_ box: Sandbox) throws -> [[String: Any]] {
    try box.events("unreadableClass").map {
      try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
    }
  }

  @Test(
    "a value that names no class is complete: refused while locked, readable unlocked, reported once",
    arguments: badValues, attributes)
  func unparsable(_ value: [UInt8], attribute: String) throws {
    let box = try Self.sandbox(with: value, in: attribute)
    #expect(box.fs.lock() == .locked)
    #expect(throws: Errno.notPermitted) { try box.open("Documents/f") }
    #expect(throws: Errno.notPermitted) { try box.open("Documents/f") }
    #expect(box.fs.unlock() == .unlocked)
    let file = try box.open("Documents/f")
    #expect(try box.read(file, count: 10).count == 10)
    box.release(file)
    #expect(try box.getxattr("Documents/f", AppBoxAttribute.protection.name) == Array("complete".utf8))

    let reports = try Self.reports(box)
    try #require(reports.count == 1, "one report for the file, however often it is used")
    #expect(reports[0]["path"] as? String == "Documents/f")
    #expect(reports[0]["attribute"] as? String == attribute)
    #expect(reports[0]["class"] as? String == "complete")
    if JSONText.isValidUTF8(value) {
      #expect(Array((reports[0]["value"] as? String ?? "?").utf8) == value)
      #expect(reports[0]["valueHex"] == nil)
    } else {
      #expect(reports[0]["valueHex"] as? String == JSONText.hex(value))
    }
    #expect(box.fs.unreadableClasses.total == 1)
    #expect(box.fs.statusJSON().contains("\"unreadableClasses\":1"))
  }

  @Test("an explicit class that names no class is not overridden by a valid inherited one")
  func explicitDecides() throws {
    let box = try Self.sandbox(with: Array("Complete".utf8), in: AppBoxAttribute.protection.name)
    try Xattr.set(
      path: box.backing + "/Documents/f", name: AppBoxAttribute.inheritedProtectionName, value: Array("none".utf8))
    #expect(box.fs.lock() == .locked)
    #expect(throws: Errno.notPermitted) { try box.open("Documents/f") }
  }

  @Test("a class that cannot be read (EIO) is complete, reported with its error, logged and counted")
  func unreadable() throws {
    let fresh = try Self.sandbox(with: nil, in: "")
    #expect(fresh.fs.lock() == .locked)
    SyscallFaults.inject([.getxattr: SyscallFault(.ioError, name: AppBoxAttribute.protection.name)]) { faults in
      #expect(throws: Errno.notPermitted) { try fresh.open("Documents/f") }
      #expect(faults.failures(.getxattr) == 1)
    }
    let reports = try Self.reports(fresh)
    try #require(reports.count == 1)
    #expect(reports[0]["error"] as? String == "EIO")
    #expect(reports[0]["value"] == nil)
    #expect(fresh.fs.internalErrors.count(at: .classRead) == 1)
    #expect(fresh.fs.statusJSON().contains("\"classRead\":1"))
  }

  @Test("only ENODATA means no class: the mount's default then")
  func noDataIsAbsent() throws {
    let fresh = try Self.sandbox(with: nil, in: "")
    #expect(fresh.fs.lock() == .locked)
    try SyscallFaults.inject([.getxattr: SyscallFault(.noData)]) { _ throws in
      fresh.release(try fresh.open("Documents/f"))  // the default, C: open while locked
    }
    #expect(try Self.reports(fresh).isEmpty)
  }

  @Test("setting a class repairs the file")
  func repair() throws {
    let box = try Self.sandbox(with: Array("Complete".utf8), in: AppBoxAttribute.protection.name)
    try box.setxattr("Documents/f", AppBoxAttribute.protection.name, "none")
    #expect(box.fs.lock() == .locked)
    box.release(try box.open("Documents/f"))
    #expect(box.fs.unlock() == .unlocked)
    #expect(try Self.reports(box).count == 1)
  }

  @Test("while locked the class cannot be changed (the current class, complete, is closed)")
  func noRepairWhileLocked() throws {
    let box = try Self.sandbox(with: [0xFF], in: AppBoxAttribute.protection.name)
    #expect(box.fs.lock() == .locked)
    #expect(throws: Errno.notPermitted) { try box.setxattr("Documents/f", AppBoxAttribute.protection.name, "none") }
  }

  @Test("removing the own class falls back to an unusable inherited one as complete")
  func fallbackUnusable() throws {
    let box = try Self.sandbox(with: Array("01".utf8), in: AppBoxAttribute.inheritedProtectionName)
    try box.setxattr("Documents/f", AppBoxAttribute.protection.name, "none")
    try box.removexattr("Documents/f", AppBoxAttribute.protection.name)
    #expect(try box.getxattr("Documents/f", AppBoxAttribute.protection.name) == Array("complete".utf8))
    #expect(box.fs.lock() == .locked)
    #expect(throws: Errno.notPermitted) { try box.open("Documents/f") }
  }

  @Test("a directory whose class names no class gives new items complete")
  func directoryUnusable() throws {
    let fresh = try Sandbox(prepare: { backing in
      try Sys.mkdir(backing + "/Documents", 0o755)
      try Sys.mkdir(backing + "/Documents/d", 0o755)
      try Xattr.set(path: backing + "/Documents/d", name: AppBoxAttribute.protection.name, value: Array("X".utf8))
    })
    fresh.release(try fresh.create("Documents/d/new"))
    #expect(try fresh.getxattr("Documents/d/new", AppBoxAttribute.protection.name) == Array("complete".utf8))
    #expect(fresh.fs.lock() == .locked)
    #expect(throws: Errno.notPermitted) { try fresh.open("Documents/d/new") }
    #expect(throws: Errno.notPermitted) { try fresh.create("Documents/d/other") }
  }

  @Test(
    "a default recorded on the backing root that names no class refuses the mount and changes nothing",
    arguments: [Array("Complete".utf8), [0xFF], []])
  func badDefault(_ value: [UInt8]) throws {
    let root = try SandboxRoot()
    let backing = root.backing
    try Xattr.set(path: backing, name: DefaultProtection.attributeName, value: value)
    #expect {
      _ = try SandboxFilesystem(
        backingDirectory: backing, configuration: CacheTimeouts(), options: SandboxOptions(), driver: InMemoryDriver())
    } throws: { error in
      guard case .unknownDefaultProtection(let stored) = error as? SandboxSetupError else { return false }
      return stored == value
    }
    #expect(TestFiles.entries(of: backing).isEmpty, "no fixed directory made")
    #expect(try Xattr.value(path: backing, name: DefaultProtection.attributeName) == value, "the record is kept")
  }

  @Test("a default on the backing root that cannot be read refuses the mount")
  func unreadableDefault() throws {
    let root = try SandboxRoot()
    let backing = root.backing
    SyscallFaults.inject([.getxattr: SyscallFault(.ioError, name: DefaultProtection.attributeName)]) { _ in
      #expect {
        _ = try SandboxFilesystem(
          backingDirectory: backing, configuration: CacheTimeouts(), options: SandboxOptions(),
          driver: InMemoryDriver())
      } throws: { error in
        guard case .unreadableDefaultProtection(let errno) = error as? SandboxSetupError else { return false }
        return errno == .ioError
      }
    }
    #expect(TestFiles.entries(of: backing).isEmpty)
  }

  @Test("DefaultProtection.recorded never takes a record that names no class, or cannot be read, for none")
  func recordedDefault() throws {
    let root = try SandboxRoot()
    let fd = try Sys.open(root.backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { Sys.close(fd) }
    #expect(try DefaultProtection.recorded(rootFD: fd) == nil, "no record: none")
    try Xattr.set(fd, name: DefaultProtection.attributeName, value: Array("Complete".utf8))
    #expect(throws: Errno.invalidArgument) { try DefaultProtection.recorded(rootFD: fd) }
    try Xattr.set(fd, name: DefaultProtection.attributeName, value: Array("complete".utf8))
    SyscallFaults.inject([.getxattr: SyscallFault(.ioError, name: DefaultProtection.attributeName)]) { _ in
      #expect(throws: Errno.ioError) { try DefaultProtection.recorded(rootFD: fd) }
    }
    #expect(try DefaultProtection.recorded(rootFD: fd) == .complete)
  }
}
