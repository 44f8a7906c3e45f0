import SandboxPolicy
import Testing

@testable import AppBoxBackup

@Suite("Restore plans: what the paths of a backup's rows may be")
struct RestorePlanTests {
  static func row(_ path: [UInt8], _ flags: Int64 = 1, id: String? = nil) -> RestorePlan.Row {
    RestorePlan.Row(
      rowID: Int64(path.count), fileID: id ?? BackupLayout.fileID(domain: "AppDomain-x", relativePath: path),
      relativePath: path, flags: flags)
  }

  static func row(_ path: String, _ flags: Int64 = 1, id: String? = nil) -> RestorePlan.Row {
    row(Array(path.utf8), flags, id: id)
  }

  static func paths(_ plan: RestorePlan) -> [String] {
    plan.items.map { String(decoding: $0.row.relativePath, as: UTF8.self) }
  }

  @Test("parents come first and every subtree is one run ('a/b' before 'a b', though ' ' sorts before '/')")
  func order() throws {
    let plan = try RestorePlan([
      Self.row("Documents/a b"), Self.row("Documents/a/b"), Self.row("Documents/a", 2), Self.row("Documents", 2),
      Self.row("Library/Preferences/p"), Self.row("Documents/a/b2"),
    ])
    #expect(
      Self.paths(plan) == [
        "Documents", "Documents/a", "Documents/a/b", "Documents/a/b2", "Documents/a b", "Library/Preferences/p",
      ])
    #expect(plan.depth == 3)
  }

  @Test("the domain's own row is no item; rows outside Documents and Library are counted and left out")
  func skipped() throws {
    let plan = try RestorePlan([
      Self.row("", 2), Self.row("Library/Caches/x"), Self.row("tmp/y"), Self.row("SystemData/z"),
      Self.row("Documents/kept"),
    ])
    #expect(Self.paths(plan) == ["Documents/kept"])
    #expect(plan.skipped == 3)
  }

  @Test("a symlink or file is a leaf: a sibling whose name starts alike is not below it")
  func siblingsOfLeaves() throws {
    let plan = try RestorePlan([Self.row("Documents/l", 4), Self.row("Documents/l2/x"), Self.row("Documents/l 3")])
    #expect(plan.items.count == 3)
  }

  static var hostile: [(rows: [RestorePlan.Row], message: String)] {
    [
      ([row("Documents/a"), row("Documents/a")], "twice"),
      ([row("Documents/d", 2), row("Documents/d", 2)], "twice"),
      ([row("Documents/d", 2), row("Documents/d", 1)], "twice"),
      ([row("Documents", 1)], "sandbox's own directories"),
      ([row("Library", 4)], "sandbox's own directories"),
      ([row("Library/Preferences", 1)], "sandbox's own directories"),
      ([row("Library/Application Support", 4)], "sandbox's own directories"),
      ([row("Documents/f"), row("Documents/f/g")], "lies below Documents/f, which is a file"),
      ([row("Documents/l", 4), row("Documents/l/x/y")], "lies below Documents/l, which is a symlink"),
      ([row("Documents/" + String(repeating: "n", count: 256))], "256 bytes long"),
      ([row("Documents/" + Array(repeating: "d", count: 2048).joined(separator: "/"), 2)], "2049 levels deep"),
      ([row("/Documents/a")], "not a relative path"),
      ([row("Documents//a")], "not a relative path"),
      ([row("Documents/./a")], "not a relative path"),
      ([row("Documents/../x")], "not a relative path"),
      ([row("Documents/a/")], "not a relative path"),
      ([row(Array("Documents/a".utf8) + [0] + Array("b".utf8))], "not a relative path"),
      ([row("Documents/x", 8)], "flags 8"),
      ([row("Documents/x", 1, id: "xyz")], "file id"),
      ([row("Documents/x", 1, id: String(repeating: "AB", count: 20))], "file id"),
    ]
  }

  @Test("hostile or inconsistent rows are refused, naming the path", arguments: hostile.indices)
  func hostileRows(_ index: Int) {
    let (rows, message) = Self.hostile[index]
    #expect {
      try RestorePlan(rows)
    } throws: { error in
      (error as? RestoreProblem)?.description.contains(message) == true
    }
  }

  @Test("a directory row needs no file id; 255-byte names and 2048 levels are fine")
  func limits() throws {
    #expect(throws: Never.self) { try RestorePlan([Self.row("Documents/d", 2, id: "")]) }
    #expect(throws: Never.self) { try RestorePlan([Self.row("Documents/" + String(repeating: "n", count: 255))]) }
    let deep = "Documents/" + Array(repeating: "d", count: 2047).joined(separator: "/")
    #expect(try RestorePlan([Self.row(deep, 2)]).depth == 2048)
  }

  // MARK: - Records

  static func record(
    _ kind: BackupFileRecord.Kind = .file, size: Int64 = 0, protection: Int64 = 3,
    attributes: [(name: [UInt8], value: [UInt8])] = [], target: [UInt8]? = nil
  ) -> BackupFileRecord {
    BackupFileRecord(
      relativePath: Array("Documents/r".utf8), kind: kind, mode: 0o100644, userID: 0, groupID: 0, size: size, inode: 0,
      birth: 0, lastModified: 0, lastStatusChange: 0, protectionClass: protection, extendedAttributes: attributes,
      target: target)
  }

  @Test("classes: 0 means none, Apple's 1, 2, 3, 4 and 7 are known, anything else is refused")
  func protectionClasses() throws {
    #expect(try RestorePlan.check(Self.record(protection: 0)) == nil)
    for (number, known) in [
      (1, ProtectionClass.complete), (2, .completeUnlessOpen), (3, .completeUntilFirstUserAuthentication), (4, .none),
      (7, .completeWhenUserInactive),
    ] {
      #expect(try RestorePlan.check(Self.record(protection: Int64(number))) == known)
    }
    for number: Int64 in [5, 6, 8, -1, 99, .max] {
      #expect(throws: RestoreProblem.self) { try RestorePlan.check(Self.record(protection: number)) }
    }
  }

  @Test("sizes, symlink targets and attributes a restore could not write are refused")
  func records() {
    let name = Array("user.x".utf8)
    let refused: [BackupFileRecord] = [
      Self.record(size: -1),
      Self.record(.symlink), Self.record(.symlink, target: []), Self.record(.symlink, target: [0x61, 0, 0x62]),
      Self.record(.symlink, target: [UInt8](repeating: 0x61, count: 4096)),
      Self.record(attributes: [([], [1])]), Self.record(attributes: [(Array("user.a".utf8) + [0], [1])]),
      Self.record(attributes: [(name, [UInt8](repeating: 1, count: 65537))]),
      Self.record(attributes: [(Array("user.".utf8) + [UInt8](repeating: 0x78, count: 251), [1])]),
      // Apple's names are stored as user.appbox.x.NAME: 242 bytes become 256.
      Self.record(attributes: [(Array("com.apple.".utf8) + [UInt8](repeating: 0x78, count: 232), [1])]),
    ]
    for record in refused {
      #expect(throws: RestoreProblem.self) { try RestorePlan.check(record) }
    }
    let accepted: [BackupFileRecord] = [
      Self.record(.symlink, target: [UInt8](repeating: 0x61, count: 4095)),
      Self.record(attributes: [(name, [UInt8](repeating: 1, count: 65536))]),
      Self.record(attributes: [(Array("user.".utf8) + [UInt8](repeating: 0x78, count: 250), [1])]),
      // Left out, whatever their length: the kernel's namespaces and AppBox's own.
      Self.record(attributes: [(Array("security.".utf8) + [UInt8](repeating: 0x78, count: 300), [1])]),
      Self.record(attributes: [(Array("user.appbox.protection".utf8), Array("none".utf8))]),
    ]
    for record in accepted {
      #expect(throws: Never.self) { try RestorePlan.check(record) }
    }
    #expect(RestorePlan.backingAttributeName(Array("user.appbox.protection".utf8)) == nil)
    #expect(RestorePlan.backingAttributeName(Array("trusted.x".utf8)) == nil)
    #expect(RestorePlan.backingAttributeName(Array("com.apple.x".utf8)) == Array("user.appbox.x.com.apple.x".utf8))
    #expect(RestorePlan.backingAttributeName(Array("user.tag".utf8)) == Array("user.tag".utf8))
  }
}
