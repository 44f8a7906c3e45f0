import SandboxPolicy

/// What a backup holds and what it left out, as `appbox backup` reports it: totals, by
/// directory, the largest items, and what exclusion, Caches and tmp saved.
public struct BackupReport: Sendable {
  /// A path and its bytes.
  public struct Item: Sendable, Equatable {
    /// Path below the container root.
    public var path: [UInt8]
    /// Bytes (a directory's: its subtree's).
    public var bytes: Int64
  }

  /// Files and bytes of one group.
  public struct Tally: Sendable, Equatable {
    /// Regular files.
    public var files = 0
    /// Their bytes.
    public var bytes: Int64 = 0
  }

  /// How many of the largest items are kept.
  public static let largestCount = 10
  /// The deepest item a backup holds: as deep as a restore makes (``tooDeep`` lists
  /// what lies deeper).
  public static let maximumDepth = RestorePlan.maximumDepth

  /// Included regular files and their bytes.
  public private(set) var included = Tally()
  /// Included directories.
  public private(set) var directories = 0
  /// Included symlinks.
  public private(set) var symlinks = 0
  /// Included bytes by directory (`Documents`, `Library/Application Support`,
  /// `Library/Preferences`, `Library (other)`), in that order.
  public private(set) var byDirectory: [(name: String, tally: Tally)] = BackupReport.groups.map { ($0, Tally()) }
  /// The largest included files, largest first.
  public private(set) var largest: [Item] = []
  /// Files under excluded items, and their bytes.
  public private(set) var excluded = Tally()
  /// The excluded items themselves (a directory counts with its subtree), in walk order.
  public private(set) var excludedItems: [(item: Item, by: BackupRules.Exclusion)] = []
  /// Files and bytes in `Library/Caches/`, never backed up.
  public private(set) var caches = Tally()
  /// Files and bytes in `tmp/`, never backed up.
  public private(set) var tmp = Tally()
  /// Files that changed while copied and were copied again (consistent in the end).
  public var recopied: [[UInt8]] = []
  /// Files that kept growing while copied: the backup holds their first bytes, verified
  /// unchanged after the copy (the file as it was when that copy began).
  public var grown: [[UInt8]] = []
  /// Files that kept changing and whose copy could not be verified: left out.
  public var skipped: [[UInt8]] = []
  /// Items nested deeper than a restore makes (with their subtrees): left out.
  public var tooDeep: [[UInt8]] = []

  private static let groups = ["Documents", "Library/Application Support", "Library/Preferences", "Library (other)"]

  /// An empty report.
  public init() {}

  /// The report group of an included path.
  public static func group(of components: [[UInt8]]) -> Int {
    if components.first?.elementsEqual("Documents".utf8) == true { return 0 }
    if components.count > 1 {
      if components[1].elementsEqual("Application Support".utf8) { return 1 }
      if components[1].elementsEqual("Preferences".utf8) { return 2 }
    }
    return 3
  }

  /// Counts an included item.
  public mutating func addIncluded(_ components: [[UInt8]], kind: BackupFileRecord.Kind, bytes: Int64) {
    switch kind {
    case .directory: directories += 1
    case .symlink: symlinks += 1
    case .file:
      included.files += 1
      included.bytes.addSaturating(bytes)
      byDirectory[Self.group(of: components)].tally.files += 1
      byDirectory[Self.group(of: components)].tally.bytes.addSaturating(bytes)
      guard largest.count < Self.largestCount || bytes > largest[largest.count - 1].bytes else { return }
      let item = Item(path: Self.join(components), bytes: bytes)
      let index = largest.firstIndex { $0.bytes < bytes } ?? largest.count
      largest.insert(item, at: index)
      if largest.count > Self.largestCount { largest.removeLast() }
    }
  }

  /// Counts an excluded item: `files` and `bytes` of its subtree.
  public mutating func addExcluded(
    _ components: [[UInt8]], by exclusion: BackupRules.Exclusion, files: Int, bytes: Int64
  ) {
    excluded.files += files
    excluded.bytes.addSaturating(bytes)
    excludedItems.append((Item(path: Self.join(components), bytes: bytes), exclusion))
  }

  /// Counts files of Caches or tmp.
  public mutating func addNotBackedUp(_ scope: BackupRules.Scope, files: Int, bytes: Int64) {
    switch scope {
    case .caches:
      caches.files += files
      caches.bytes.addSaturating(bytes)
    case .tmp:
      tmp.files += files
      tmp.bytes.addSaturating(bytes)
    case .backedUp, .outside: break
    }
  }

  static func join(_ components: [[UInt8]]) -> [UInt8] {
    Array(components.joined(separator: [UInt8(ascii: "/")]))
  }

  private static func name(_ path: [UInt8]) -> String { String(decoding: path, as: UTF8.self) }

  private static func size(_ bytes: Int64) -> String { ByteCount(bytes).formatted }

  // MARK: - Rendering

  /// The report for people. A dry run lists the largest files in backed-up locations
  /// first: what a reviewer questions, and what the app costs a user's iCloud.
  public func text(dryRun: Bool) -> String {
    var lines: [String] = []
    let largestLines =
      ["largest backed-up files:"]
      + (largest.isEmpty ? ["  (none)"] : largest.map { "  \(Self.size($0.bytes).padded(10))  \(Self.name($0.path))" })
    if dryRun { lines += largestLines + [""] }
    lines.append(
      "\(dryRun ? "would back up" : "backed up"): \(Self.size(included.bytes)) in \(included.files) files, \(directories) directories, \(symlinks) symlinks"
    )
    for (name, tally) in byDirectory {
      lines.append("  \(Self.size(tally.bytes).padded(10))  \(tally.files) files  \(name)")
    }
    lines.append("not backed up:")
    lines.append(
      "  \(Self.size(excluded.bytes).padded(10))  \(excluded.files) files  excluded (\(excludedItems.count) items flagged)"
    )
    lines.append("  \(Self.size(caches.bytes).padded(10))  \(caches.files) files  Library/Caches")
    lines.append("  \(Self.size(tmp.bytes).padded(10))  \(tmp.files) files  tmp")
    for (item, by) in excludedItems.prefix(Self.largestCount) {
      lines.append(
        "  excluded (\(by == .modern ? "isExcludedFromBackup" : "com.apple.MobileBackup")): \(Self.name(item.path)) \(Self.size(item.bytes))"
      )
    }
    if excludedItems.count > Self.largestCount {
      lines.append("  … and \(excludedItems.count - Self.largestCount) more excluded items")
    }
    if !dryRun { lines += largestLines }
    for path in recopied { lines.append("copied again (changed while copied): \(Self.name(path))") }
    for path in grown { lines.append("grew while copied (backed up as it was when copied): \(Self.name(path))") }
    for path in skipped { lines.append("error: kept changing while copied, left out: \(Self.name(path))") }
    for path in tooDeep { lines.append("error: nested too deep to restore, left out: \(Self.name(path))") }
    return lines.joined(separator: "\n")
  }

  /// The report as one JSON object.
  public func json(dryRun: Bool) -> String {
    func tally(_ t: Tally) -> String { "{\"files\":\(t.files),\"bytes\":\(t.bytes)}" }
    func item(_ i: Item) -> String {
      var out = "{\"path\":\(JSONText.quoted(bytes: i.path)),\"bytes\":\(i.bytes)"
      if !JSONText.isValidUTF8(i.path) { out += ",\"pathHex\":\"\(JSONText.hex(i.path))\"" }
      return out + "}"
    }
    func paths(_ list: [[UInt8]]) -> String {
      "[" + list.map { JSONText.quoted(bytes: $0) }.joined(separator: ",") + "]"
    }
    let groups = byDirectory.map { "\(JSONText.quoted($0.name)):\(tally($0.tally))" }.joined(separator: ",")
    let excludedList = excludedItems.map { item($0.item).dropLast() + ",\"by\":\"\($0.by.rawValue)\"}" }
    return "{\"dryRun\":\(dryRun),\"included\":{\"files\":\(included.files),\"bytes\":\(included.bytes),"
      + "\"directories\":\(directories),\"symlinks\":\(symlinks)},\"byDirectory\":{\(groups)},"
      + "\"largest\":[\(largest.map(item).joined(separator: ","))],"
      + "\"excluded\":{\"files\":\(excluded.files),\"bytes\":\(excluded.bytes),\"items\":[\(excludedList.joined(separator: ","))]},"
      + "\"caches\":\(tally(caches)),\"tmp\":\(tally(tmp)),\"recopied\":\(paths(recopied)),\"grown\":\(paths(grown)),\"skipped\":\(paths(skipped)),\"tooDeep\":\(paths(tooDeep))}"
  }
}

extension String {
  fileprivate func padded(_ width: Int) -> String {
    count >= width ? self : String(repeating: " ", count: width - count) + self
  }
}

extension Int64 {
  /// Adds `other`, stopping at the largest value instead of overflowing: sizes of sparse
  /// files (up to 16 TiB each on ext4) can add up past 2⁶³.
  public mutating func addSaturating(_ other: Int64) {
    let (sum, overflow) = addingReportingOverflow(other)
    self = overflow ? (other > 0 ? .max : .min) : sum
  }
}
