import PropertyLists
import SandboxPolicy

/// One item of an iOS backup: a row of `Manifest.db`'s `Files` table and its `file`
/// column, an `NSKeyedArchiver` archive of an `MBFile` record.
///
/// The archive, as iOS writes it: `$objects[0]` is `$null`, `$objects[1]` the `MBFile`
/// dictionary (`Birth`, `LastModified`, `LastStatusChange` in Unix seconds, `Mode`,
/// `UserID`, `GroupID`, `Size`, `InodeNumber`, `Flags`, `ProtectionClass` as Apple's
/// number, `RelativePath` a UID reference to a string, optionally `Target` for a symlink
/// and `ExtendedAttributes`, a reference to an `NSMutableData` holding a binary plist of
/// attribute name → value), followed by the referenced objects and the class records.
public struct BackupFileRecord: Sendable, Equatable {
  /// The `Files.flags` column.
  public enum Kind: Int64, Sendable {
    /// A regular file (1).
    case file = 1
    /// A directory (2).
    case directory = 2
    /// A symbolic link (4).
    case symlink = 4
  }

  /// Why an archived record cannot be read.
  public enum ReadError: Error, Equatable, CustomStringConvertible {
    /// The archive, or its attribute table, is not a property list.
    case plist(PropertyListError)
    /// It is a plist but not an `MBFile` archive.
    case notArchive(String)

    public var description: String {
      switch self {
      case .plist(let error): error.description
      case .notArchive(let why): "not an MBFile archive: \(why)"
      }
    }
  }

  /// The path below the domain, e.g. `Documents/a.txt` (bytes: Linux names need not be UTF-8).
  public var relativePath: [UInt8]
  /// File, directory or symlink.
  public var kind: Kind
  /// `st_mode`, type bits included.
  public var mode: UInt32
  /// Owner.
  public var userID: UInt32
  /// Group.
  public var groupID: UInt32
  /// Size in bytes (0 for directories).
  public var size: Int64
  /// The inode number (hard links share one).
  public var inode: UInt64
  /// Creation time, Unix seconds.
  public var birth: Int64
  /// Modification time, Unix seconds.
  public var lastModified: Int64
  /// Status-change time, Unix seconds.
  public var lastStatusChange: Int64
  /// Apple's number of the Data Protection class (``ProtectionClass/appleNumber``), 0 if none.
  public var protectionClass: Int64
  /// Extended attributes by their names on the mount (Apple's), in order.
  public var extendedAttributes: [(name: [UInt8], value: [UInt8])]
  /// A symlink's target.
  public var target: [UInt8]?

  /// A record.
  public init(
    relativePath: [UInt8], kind: Kind, mode: UInt32, userID: UInt32, groupID: UInt32, size: Int64, inode: UInt64,
    birth: Int64, lastModified: Int64, lastStatusChange: Int64, protectionClass: Int64,
    extendedAttributes: [(name: [UInt8], value: [UInt8])] = [], target: [UInt8]? = nil
  ) {
    self.relativePath = relativePath
    self.kind = kind
    self.mode = mode
    self.userID = userID
    self.groupID = groupID
    self.size = size
    self.inode = inode
    self.birth = birth
    self.lastModified = lastModified
    self.lastStatusChange = lastStatusChange
    self.protectionClass = protectionClass
    self.extendedAttributes = extendedAttributes
    self.target = target
  }

  public static func == (lhs: BackupFileRecord, rhs: BackupFileRecord) -> Bool {
    lhs.relativePath == rhs.relativePath && lhs.kind == rhs.kind && lhs.mode == rhs.mode
      && lhs.userID == rhs.userID && lhs.groupID == rhs.groupID && lhs.size == rhs.size && lhs.inode == rhs.inode
      && lhs.birth == rhs.birth && lhs.lastModified == rhs.lastModified
      && lhs.lastStatusChange == rhs.lastStatusChange && lhs.protectionClass == rhs.protectionClass
      && lhs.extendedAttributes.count == rhs.extendedAttributes.count
      && zip(lhs.extendedAttributes, rhs.extendedAttributes).allSatisfy { $0.name == $1.name && $0.value == $1.value }
      && lhs.target == rhs.target
  }

  // MARK: - Archiving

  /// The `Files.file` column: the record as a binary-plist `NSKeyedArchiver` archive.
  public func archive() -> [UInt8] {
    var objects: [PropertyList] = [.string("$null"), .dictionary([]), .string(Self.text(relativePath))]
    var record: [(String, PropertyList)] = [
      ("Birth", .integer(birth)), ("Flags", .integer(0)), ("GroupID", .integer(Int64(groupID))),
      ("InodeNumber", .integer(Int64(bitPattern: inode))), ("LastModified", .integer(lastModified)),
      ("LastStatusChange", .integer(lastStatusChange)), ("Mode", .integer(Int64(mode))),
      ("ProtectionClass", .integer(protectionClass)), ("RelativePath", .uid(2)), ("Size", .integer(size)),
      ("UserID", .integer(Int64(userID))),
    ]
    if !extendedAttributes.isEmpty {
      let table = PropertyList.dictionary(extendedAttributes.map { (Self.text($0.name), .data($0.value)) })
      objects.append(
        .dictionary([("NS.data", .data(table.encoded(as: .binary))), ("$class", .uid(UInt64(objects.count + 1)))]))
      record.append(("ExtendedAttributes", .uid(UInt64(objects.count - 1))))
      objects.append(Self.classRecord(["NSMutableData", "NSData", "NSObject"]))
    }
    if let target {
      record.append(("Target", .uid(UInt64(objects.count))))
      objects.append(.string(Self.text(target)))
    }
    record.insert(("$class", .uid(UInt64(objects.count))), at: 0)
    objects.append(Self.classRecord(["MBFile", "NSObject"]))
    objects[1] = .dictionary(record)
    return PropertyList.dictionary([
      ("$version", .integer(100000)), ("$archiver", .string("NSKeyedArchiver")),
      ("$top", .dictionary([("root", .uid(1))])), ("$objects", .array(objects)),
    ]).encoded(as: .binary)
  }

  private static func classRecord(_ classes: [String]) -> PropertyList {
    .dictionary([("$classname", .string(classes[0])), ("$classes", .array(classes.map(PropertyList.string)))])
  }

  /// Plist strings are Unicode: bytes that are not UTF-8 are decoded with replacements
  /// (the `Files.relativePath` column keeps the exact bytes).
  private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

  /// Reads a `Files` row: `relativePath` and `flags` from their columns (exact bytes), the
  /// rest from the archive in `file`.
  public static func unarchive(_ file: [UInt8], relativePath: [UInt8], flags: Int64) throws(ReadError)
    -> BackupFileRecord
  {
    let root: PropertyList
    do throws(PropertyListError) {
      root = try PropertyList(decoding: file)
    } catch {
      throw .plist(error)
    }
    guard let objects = root["$objects"]?.arrayValue, objects.count > 1, case .dictionary = objects[1] else {
      throw .notArchive("no $objects[1] record")
    }
    let record = objects[1]
    func object(_ key: String) -> PropertyList? {
      guard let value = record[key] else { return nil }
      if let uid = value.uidValue { return uid < objects.count ? objects[Int(uid)] : nil }
      return value
    }
    func integer(_ key: String) -> Int64 { record[key]?.integerValue ?? 0 }
    guard let mode = record["Mode"]?.integerValue, let kind = Kind(rawValue: flags) else {
      throw .notArchive("no Mode, or flags \(flags) is not 1, 2 or 4")
    }
    var attributes: [(name: [UInt8], value: [UInt8])] = []
    if let container = object("ExtendedAttributes") {
      let bytes = container["NS.data"]?.dataValue ?? container.dataValue
      guard let bytes else { throw .notArchive("ExtendedAttributes holds no data") }
      let table: PropertyList
      do throws(PropertyListError) { table = try PropertyList(decoding: bytes) } catch {
        throw .plist(error)
      }
      guard case .dictionary(let pairs) = table else { throw .notArchive("ExtendedAttributes is not a dictionary") }
      for (name, value) in pairs {
        switch value {
        case .data(let bytes): attributes.append((Array(name.utf8), bytes))
        case .string(let text): attributes.append((Array(name.utf8), Array(text.utf8)))
        default: throw .notArchive("attribute \(name) is neither data nor a string")
        }
      }
    }
    var target: [UInt8]?
    if let value = object("Target") {
      guard let text = value.stringValue else { throw .notArchive("Target is not a string") }
      target = Array(text.utf8)
    }
    return BackupFileRecord(
      relativePath: relativePath, kind: kind, mode: UInt32(truncatingIfNeeded: mode),
      userID: UInt32(truncatingIfNeeded: integer("UserID")), groupID: UInt32(truncatingIfNeeded: integer("GroupID")),
      size: integer("Size"), inode: UInt64(bitPattern: integer("InodeNumber")), birth: integer("Birth"),
      lastModified: integer("LastModified"), lastStatusChange: integer("LastStatusChange"),
      protectionClass: integer("ProtectionClass"), extendedAttributes: attributes, target: target)
  }
}
