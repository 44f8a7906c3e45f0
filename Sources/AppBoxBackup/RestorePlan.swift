import SandboxPolicy

/// Why a backup cannot be restored: it is hostile or inconsistent (exit 65). Found before
/// anything is written.
struct RestoreProblem: Error, Equatable, CustomStringConvertible {
  /// What is wrong, naming the path.
  let description: String

  init(_ description: String) { self.description = description }
}

/// The rows of one app domain in the order a restore makes them, checked for everything
/// that can be judged from the paths alone: a path that is not relative, a name longer
/// than a directory entry may be, a path deeper than ``maximumDepth``, a path given twice,
/// one of the sandbox's own directories made a file or symlink, and a path below a file
/// or symlink (what a symlink row would let later rows write through).
///
/// Sorted by components, so that every directory comes before its contents and each
/// subtree is contiguous (an excluded directory's subtree is then one run of items).
struct RestorePlan {
  /// One row of `Files`, without its record.
  struct Row: Equatable {
    /// SQLite's row id, to fetch the record with.
    var rowID: Int64
    /// The `fileID` column.
    var fileID: String
    /// The `relativePath` column's bytes.
    var relativePath: [UInt8]
    /// The `flags` column.
    var flags: Int64
  }

  /// A row to restore.
  struct Item: Equatable {
    /// The row.
    var row: Row
    /// Its path's components.
    var components: [[UInt8]]
    /// What it is.
    var kind: BackupFileRecord.Kind
  }

  /// The items to restore, parents first.
  private(set) var items: [Item] = []
  /// Rows outside Documents and Library (Caches, tmp, other top-level names): left out.
  private(set) var skipped = 0
  /// The deepest item's depth.
  private(set) var depth = 0

  /// The longest name a directory entry may have (`NAME_MAX`).
  static let nameMax = 255
  /// The deepest path a restore makes: as deep as a path of `PATH_MAX` (4096) bytes can
  /// be. A restore holds a descriptor per level.
  static let maximumDepth = 2048
  /// The sandbox's own directories, which a restore makes and a backup's rows may only
  /// describe as directories.
  static let layoutDirectories: [[[UInt8]]] = [
    ["Documents"], ["Library"], ["Library", "Application Support"], ["Library", "Preferences"],
  ].map { $0.map { Array($0.utf8) } }

  /// An App Group container's own directories (Caches is never restored).
  static let groupLayoutDirectories: [[[UInt8]]] = [["Library"], ["Library", "Preferences"]].map {
    $0.map { Array($0.utf8) }
  }

  /// The own directories of a container of `kind`.
  static func layoutDirectories(of kind: ContainerKind) -> [[[UInt8]]] {
    kind == .app ? layoutDirectories : groupLayoutDirectories
  }

  /// What kind of container the rows are restored into.
  let kind: ContainerKind

  /// Checks and orders `rows` (one domain's, restored into a container of `kind`).
  /// - Throws: ``RestoreProblem`` naming the first row that makes the backup hostile or
  ///   inconsistent.
  init(_ rows: [Row], kind: ContainerKind = .app) throws(RestoreProblem) {
    self.kind = kind
    let layoutDirectories = Self.layoutDirectories(of: kind)
    for row in rows {
      if row.relativePath.isEmpty { continue }  // the domain's own directory
      let components = row.relativePath.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(
        Array.init)
      guard !row.relativePath.contains(0),
        components.allSatisfy({ !$0.isEmpty && $0 != [0x2E] && $0 != [0x2E, 0x2E] })
      else {
        throw RestoreProblem("the path \(Self.text(row.relativePath)) is not a relative path")
      }
      guard BackupRules.restorableComponents(row.relativePath, in: self.kind) != nil else {
        skipped += 1
        continue
      }
      guard let kind = BackupFileRecord.Kind(rawValue: row.flags) else {
        throw RestoreProblem(
          "\(Self.text(row.relativePath)) has the flags \(row.flags) (1 file, 2 directory, 4 symlink)")
      }
      if let long = components.first(where: { $0.count > Self.nameMax }) {
        throw RestoreProblem(
          "a name in \(Self.text(row.relativePath)) is \(long.count) bytes long, more than \(Self.nameMax)")
      }
      guard components.count <= Self.maximumDepth else {
        throw RestoreProblem(
          "\(Self.text(row.relativePath.prefix(80)))… is \(components.count) levels deep, more than \(Self.maximumDepth)"
        )
      }
      if kind == .file {
        guard row.fileID.utf8.count == 40, row.fileID.utf8.allSatisfy({ $0.isLowercaseHexDigit }) else {
          throw RestoreProblem("\(Self.text(row.relativePath)) has the file id \(row.fileID.prefix(80))")
        }
      }
      if layoutDirectories.contains(components), kind != .directory {
        throw RestoreProblem(
          "\(Self.text(row.relativePath)) is one of the sandbox's own directories; the backup makes it a \(kind == .file ? "file" : "symlink")"
        )
      }
      items.append(Item(row: row, components: components, kind: kind))
      depth = max(depth, components.count)
    }
    items.sort { $0.components.lexicographicallyPrecedes($1.components) { $0.lexicographicallyPrecedes($1) } }
    try checkTree()
  }

  /// Finds paths given twice and paths below a file or symlink, in one pass over the
  /// sorted items (the paths below an item sort right after it).
  private func checkTree() throws(RestoreProblem) {
    var previous: Item?
    for item in items {
      if let previous {
        if previous.components == item.components {
          throw RestoreProblem("\(Self.text(item.row.relativePath)) is in the backup twice")
        }
        if previous.kind != .directory, item.components.starts(with: previous.components) {
          throw RestoreProblem(
            "\(Self.text(item.row.relativePath)) lies below \(Self.text(previous.row.relativePath)), which is a \(previous.kind == .file ? "file" : "symlink")"
          )
        }
      }
      previous = item
    }
  }

  static func text(_ bytes: some Collection<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }
}

extension RestorePlan {
  /// Apple's numbers of the classes AppBox knows, and 0, which records none (the item
  /// gets the container's default).
  static func protectionClass(appleNumber: Int64) throws(RestoreProblem) -> ProtectionClass? {
    if appleNumber == 0 { return nil }
    guard let known = ProtectionClass.allCases.first(where: { Int64($0.appleNumber) == appleNumber }) else {
      throw RestoreProblem(
        "ProtectionClass \(appleNumber) is not a Data Protection class AppBox knows (1, 2, 3, 4, 7; 0 for none)")
    }
    return known
  }

  /// The name under which a restore stores an attribute of a backup (Apple's names mapped
  /// to the backing's), or nil for one it leaves out: AppBox's own attributes and the
  /// kernel's namespaces (`security.`, `system.`, `trusted.`), which no backup may set.
  static func backingAttributeName(_ name: [UInt8]) -> [UInt8]? {
    let stored = XattrNameMapping.backingName(forMountName: name)
    guard !XattrNameMapping.isReserved(name), stored.starts(with: "user.".utf8) else { return nil }
    return stored
  }

  /// The longest extended attribute value Linux stores (`XATTR_SIZE_MAX`).
  static let attributeValueMax = 65536
  /// The longest extended attribute name Linux stores, prefix included (`XATTR_NAME_MAX`).
  static let attributeNameMax = 255
  /// The longest symlink target (`PATH_MAX` less its NUL).
  static let symlinkTargetMax = 4095

  /// Checks what a record asks a restore to write: its class, attributes and target.
  /// - Returns: the class to record (nil: none).
  /// - Throws: ``RestoreProblem`` for an unknown class, a negative size, a symlink without
  ///   a usable target, or an attribute Linux cannot hold (a name that is empty, has a
  ///   NUL or is too long once mapped to the backing's name, a value over 64 KiB).
  static func check(_ record: BackupFileRecord) throws(RestoreProblem) -> ProtectionClass? {
    let path = text(record.relativePath)
    let protection: ProtectionClass?
    do throws(RestoreProblem) {
      protection = try protectionClass(appleNumber: record.protectionClass)
    } catch {
      throw RestoreProblem("\(path): \(error)")
    }
    if record.kind == .file, record.size < 0 {
      throw RestoreProblem("\(path) has the size \(record.size)")
    }
    if record.kind == .symlink {
      guard let target = record.target, !target.isEmpty, target.count <= symlinkTargetMax, !target.contains(0) else {
        throw RestoreProblem(
          "the symlink \(path) has \(record.target == nil ? "no Target" : "a Target that is empty, has a NUL or is longer than \(symlinkTargetMax) bytes")"
        )
      }
    }
    for (name, value) in record.extendedAttributes {
      guard !name.isEmpty, !name.contains(0) else {
        throw RestoreProblem("\(path) has an attribute named \(text(name).debugDescription)")
      }
      guard let stored = backingAttributeName(name) else { continue }
      guard stored.count <= attributeNameMax else {
        throw RestoreProblem(
          "\(path) has the attribute \(text(name.prefix(64)))…, whose name is longer than \(attributeNameMax) bytes stored"
        )
      }
      guard value.count <= attributeValueMax else {
        throw RestoreProblem(
          "\(path) has the attribute \(text(name)) of \(value.count) bytes, more than Linux stores (\(attributeValueMax))"
        )
      }
    }
    return protection
  }
}

extension UInt8 {
  fileprivate var isLowercaseHexDigit: Bool { (0x30...0x39).contains(self) || (0x61...0x66).contains(self) }
}
