import SandboxPolicy

/// What a restore will take of the target's filesystem, counted before it writes anything
/// and as `du` will count the restored tree on ext4 (the common Linux filesystem; others
/// take no more for the same tree): blocks of the target's size for
///
/// - each run of data of a file (holes left out), from the block its first byte falls in
///   to the block its last byte falls in, and a block for every 340 extents of a file
///   beyond the 4 its inode holds (ext4's extent tree; an extent is a run of data of at
///   most 128 MiB);
/// - each directory's entries, 8 bytes plus the name rounded up to 4 each, `.` and `..`
///   included: at least a block, and up to twice the entries' bytes and a block more once
///   they need more than one (a hashed directory's leaves are at least half full, and its
///   index takes a block);
/// - each item's extended attributes (those a restore sets and its class) once they no
///   longer fit in the inode (88 bytes in ext4's default 256-byte inodes): 16 bytes and the
///   name and value rounded up to 4 each, with a 32-byte header, in blocks;
/// - a symlink target longer than the 59 bytes an inode holds: a block;
///
/// and one inode per file, directory and symlink.
struct RestoreSpace {
  /// The target filesystem's block size.
  let blockSize: Int64
  /// The blocks counted so far.
  private(set) var blocks: Int64 = 0
  /// The files, directories and symlinks counted so far.
  private(set) var items: Int64 = 0
  /// The directories' entries so far, by directory: the bytes of their entries.
  private var directories: [[[UInt8]]: Int64] = [:]

  /// The room for attributes in an ext4 inode of the default 256 bytes: 96 bytes after the
  /// inode's own fields, less the 4-byte header and the 4-byte end of the list.
  static let attributesInInode: Int64 = 88
  /// The extents an ext4 inode holds, and those a block of the extent tree holds.
  static let extentsInInode: Int64 = 4
  static let extentsPerBlock: Int64 = 340
  /// The longest symlink target an ext4 inode holds.
  static let targetInInode = 59

  /// An estimate for a filesystem of `blockSize` blocks, with the sandbox's own
  /// directories (root, Documents, Library and its three, tmp) counted.
  init(blockSize: Int64) {
    self.init(blockSize: blockSize, directories: ContainerKind.app.fixedDirectories.map(\.components))
  }

  /// An estimate for a filesystem of `blockSize` blocks, with the root and `directories`
  /// (paths below it; their parents too) counted: a device's own directories and its
  /// containers' (docs/reference.md#a-device).
  init(blockSize: Int64, directories: [[[UInt8]]]) {
    self.blockSize = blockSize
    addDirectory([])
    for directory in directories { addDirectory(directory) }
  }

  /// Counts a file: its data, as ``SparseCopy/measure(_:count:blockSize:)`` found it.
  mutating func addFile(_ components: [[UInt8]], data: SparseCopy.Measure) {
    addEntry(components)
    blocks.addSaturating(data.blocks)
    if data.extents > Self.extentsInInode {
      blocks.addSaturating((data.extents + Self.extentsPerBlock - 1) / Self.extentsPerBlock)
    }
  }

  /// Counts a file of `bytes` bytes written whole (no holes): a container's metadata.
  mutating func addFile(_ components: [[UInt8]], bytes: Int64) {
    addFile(
      components, data: SparseCopy.Measure(data: bytes, blocks: roundedUp(bytes, blockSize) / blockSize, extents: 1))
  }

  /// Counts another name of a file counted before (a hard link): an entry only.
  mutating func addLink(_ components: [[UInt8]]) {
    addEntry(components, isItem: false)
  }

  /// Counts a symlink with a target of `targetLength` bytes.
  mutating func addSymlink(_ components: [[UInt8]], targetLength: Int) {
    addEntry(components)
    blocks.addSaturating(Self.symlinkBlocks(targetLength: targetLength))
  }

  /// Counts a directory (its own entries come with the items in it).
  mutating func addDirectory(_ components: [[UInt8]]) {
    guard directories[components] == nil else { return }
    directories[components] = 0
    items += 1
    guard !components.isEmpty else { return }
    addEntry(components, isItem: false)
  }

  /// Counts the blocks of attributes (``attributeBlocks(_:)``).
  mutating func addAttributes(blocks count: Int64) {
    blocks.addSaturating(count)
  }

  /// The blocks counted, the directories' included: the estimate once every item is in.
  func total() -> (bytes: Int64, items: Int64) {
    var all = blocks
    for (_, entries) in directories { all.addSaturating(directoryBlocks(entries: entries)) }
    let (product, overflow) = all.multipliedReportingOverflow(by: blockSize)
    return (overflow ? .max : product, items)
  }

  // MARK: - What one item takes

  /// The blocks a symlink's target takes.
  static func symlinkBlocks(targetLength: Int) -> Int64 { targetLength > targetInInode ? 1 : 0 }

  /// The bytes of `attributes` (names as stored on the backing) as ext4 lays them out.
  static func attributeBytes(_ attributes: [(name: [UInt8], value: [UInt8])]) -> Int64 {
    var total: Int64 = 0
    for (name, value) in attributes {
      // ext4 keeps the namespace as a number: `user.` is not stored.
      let stored = name.starts(with: "user.".utf8) ? name.count - 5 : name.count
      total.addSaturating(16 + roundedUp(Int64(stored), 4) + roundedUp(Int64(value.count), 4))
    }
    return total
  }

  /// The blocks of `blockSize` that attributes of `bytes` (``attributeBytes(_:)``) take
  /// outside the inode.
  static func attributeBlocks(_ bytes: Int64, blockSize: Int64) -> Int64 {
    guard bytes > Self.attributesInInode else { return 0 }
    return roundedUp(bytes > .max - 32 ? .max : bytes + 32, blockSize) / blockSize
  }

  /// The attributes a restore sets on an item of `record` with `protection`, by the names
  /// it stores them under.
  static func restoredAttributes(_ record: BackupFileRecord, _ protection: ProtectionClass?) -> [(
    name: [UInt8], value: [UInt8]
  )] {
    var attributes: [(name: [UInt8], value: [UInt8])] = record.extendedAttributes.compactMap { name, value in
      RestorePlan.backingAttributeName(name).map { ($0, value) }
    }
    if let protection, protection != .containerDefault {
      attributes.append((Array(AppBoxAttribute.protection.name.utf8), Array(protection.name.utf8)))
    }
    return attributes
  }

  // MARK: - Directories

  /// Adds the entry of `components` to its parent's, making the parents it has no row
  /// for.
  private mutating func addEntry(_ components: [[UInt8]], isItem: Bool = true) {
    let parent = Array(components.dropLast())
    if directories[parent] == nil { addDirectory(parent) }
    directories[parent, default: 0].addSaturating(Self.entryBytes(components[components.count - 1]))
    if isItem { items += 1 }
  }

  /// The bytes of a directory entry named `name` (ext4: 8 bytes and the name, to 4).
  static func entryBytes(_ name: [UInt8]) -> Int64 { 8 + roundedUp(Int64(name.count), 4) }

  /// The blocks of a directory whose entries take `entries` bytes (`.` and `..` added).
  func directoryBlocks(entries: Int64) -> Int64 {
    let bytes = entries > .max / 2 - 24 ? .max / 2 : entries + 24
    guard bytes > blockSize else { return 1 }
    return roundedUp(2 * bytes, blockSize) / blockSize + 1
  }
}

/// `value` rounded up to a multiple of `unit`, saturating.
private func roundedUp(_ value: Int64, _ unit: Int64) -> Int64 {
  let (sum, overflow) = value.addingReportingOverflow(unit - 1)
  return overflow ? .max / unit * unit : sum / unit * unit
}
