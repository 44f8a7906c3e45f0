import AppBoxFS
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

/// Restores an app's domain from an unencrypted iOS backup (AppBox's or a real
/// device's) into a new backing directory, as a device restore does: Documents and
/// Library come back with their bytes, modes, times, classes and attributes; Caches and
/// tmp are empty; excluded items are absent.
///
/// A backup is input from anyone, so a restore trusts none of it. It works in two
/// passes. The first writes nothing: ``RestorePlan`` checks the paths, then every record
/// and every file's bytes are read and checked (class, attributes, target, size), and
/// the total, counted as the copies will take it (data only: holes stay holes), must fit
/// the target's filesystem and the sandbox's capacity when one is given. The second
/// builds everything in a private staging directory beside the target, renamed into
/// place at the end, so a bad or truncated backup leaves nothing behind. Directories are
/// opened one component at a time with `O_NOFOLLOW`, the backup's own files too, so no
/// path in a backup can lead outside either directory. Ownership is not restored (files
/// belong to the user who restores), so set-user-ID and set-group-ID bits are dropped.
public final class BackupRestorer {

  /// What was restored.
  public struct Summary: Sendable, Equatable {
    /// Regular files (hard links counted per name).
    public var files = 0
    /// Directories from rows (the sandbox's own made anyway).
    public var directories = 0
    /// Symlinks.
    public var symlinks = 0
    /// The files' bytes (their sizes, holes included).
    public var bytes: Int64 = 0
    /// Rows outside Documents and Library (Caches, tmp, others): not restored.
    public var skipped = 0
    /// Rows excluded by their attributes: not restored.
    public var excluded = 0
    /// Items whose set-user-ID or set-group-ID bit was dropped.
    public var setIDDropped = 0
    /// The bytes the restore was estimated to take before it wrote anything, as `du`
    /// counts them (``RestoreSpace``).
    public var spaceNeeded: Int64 = 0
  }

  /// What the first pass found about an item of the plan.
  private struct Checked {
    /// Excluded, or below an excluded directory: not restored.
    var excluded = false
    /// The record's size and inode number, which the second pass must find again.
    var size: Int64 = 0
    var inode: UInt64 = 0
    /// Another name of a file restored before it (same inode number and size): a link.
    var linked = false
    /// The bytes of data its copy writes (holes left out): the most the copy may write.
    var data: Int64 = 0
    /// The blocks its attributes and symlink target take: the most the second pass may
    /// find in its record.
    var extraBlocks: Int64 = 0
  }

  /// The largest `Manifest.plist` read.
  static let manifestLimit = 16 << 20
  /// The descriptors a restore needs beside one per directory level.
  static let spareDescriptors: UInt64 = 64

  private let backup: String
  private var backupFD: Int32 = -1
  /// Whose rights the backup is read with: its owner's, when root restores another
  /// user's backup (``open()``); nil: the caller's.
  private var reader: UserCredentials?
  private var buckets: [String: Int32] = [:]
  private var summary = Summary()
  private var rootFD: Int32 = -1
  /// The open directories from the root to the last row's parent.
  private var stack: [(name: [UInt8], fd: Int32)] = []
  /// Directories made from rows, in the order made, with the mode and time they get at
  /// the end (a mode that denies the user could stop a later row: a hard link into it).
  private var directoryRows: [(components: [[UInt8]], mode: mode_t, time: Int64)] = []
  /// Restored files by inode number, for hard links: path and size.
  private var restoredInodes: [UInt64: (components: [[UInt8]], size: Int64)] = [:]
  /// The mode the new backing directory gets: as its `Documents`, made with 0755 less the
  /// umask (always usable by the user).
  private var rootMode: mode_t = 0o755
  /// The block size of the target's filesystem.
  private var blockSize: Int64 = 4096
  /// The kind of container being written.
  private var rootKind = ContainerKind.app

  private let progress: BackupProgress?
  /// Where tests act as a racing user would.
  var hooks = EngineHooks()

  /// A restorer reading the backup directory `backup`; `progress` is told the items and
  /// bytes restored so far, now and then.
  public init(backup: String, progress: BackupProgress? = nil) {
    self.backup = backup
    self.progress = progress
  }

  deinit {
    for entry in stack { Sys.close(entry.fd) }
    for fd in buckets.values { Sys.close(fd) }
    if backupFD >= 0 { Sys.close(backupFD) }
  }

  // MARK: - Opening

  /// The app domains (`AppDomain-…`) of the backup and its database.
  public func open() throws(BackupError) -> (ManifestDatabase, [String]) {
    do throws(Errno) {
      backupFD = try Sys.open(backup, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      let owner = try Sys.fstat(backupFD)
      // Root reads another user's backup with that user's rights: nothing in it (a hard
      // link to a root-only file, say) can hand root's files to the restore.
      if Sys.effectiveUID == 0, owner.st_uid != 0 {
        reader = UserCredentials.of(uid: owner.st_uid, gid: owner.st_gid)
      }
    } catch  where error == .noEntry {
      throw BackupError(.unusablePath, "\(backup) does not exist")
    } catch  where error == .notDirectory {
      throw BackupError(.unusablePath, "\(backup) is not a directory")
    } catch {
      throw BackupError(.unusablePath, "cannot open \(backup): \(error)")
    }
    guard let manifest = try member(BackupLayout.manifest, limit: Self.manifestLimit) else {
      throw BackupError(.badData, "\(backup) is not an iOS backup: no Manifest.plist")
    }
    let encrypted: Bool
    do throws(BackupError) { encrypted = try BackupPlists.isEncrypted(manifest: manifest) } catch {
      throw BackupError(.badData, "\(backup)/\(error.message)")
    }
    if encrypted {
      throw BackupError(.badData, "\(backup) is encrypted: AppBox restores unencrypted backups only")
    }
    // Opened here, without following a symlink, and checked; SQLite reads this very file
    // (``ManifestDatabase``).
    let fd: Int32
    do throws(Errno) {
      fd = try asReader { () throws(Errno) in
        try Sys.openat(backupFD, BackupLayout.database, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
      }
    } catch  where error == .noEntry {
      throw BackupError(.badData, "\(backup) is not an iOS backup: no Manifest.db")
    } catch  where error == .tooManySymlinks {
      throw BackupError(.badData, "\(backup)/Manifest.db is a symlink, not a file of the backup")
    } catch {
      throw BackupError(.unusablePath, "cannot open \(backup)/Manifest.db: \(error)")
    }
    let status: stat
    do throws(Errno) { status = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw BackupError(.unusablePath, "cannot look at \(backup)/Manifest.db: \(error)")
    }
    guard status.st_mode & S_IFMT == S_IFREG else {
      Sys.close(fd)
      throw BackupError(.badData, "\(backup)/Manifest.db is not a file")
    }
    defer { Sys.close(fd) }
    do throws(ManifestDatabase.Failure) {
      let database = try ManifestDatabase(reading: fd, displayPath: backup + "/Manifest.db")
      return (database, try database.domains().filter { BackupRules.bundleID(ofDomain: $0) != nil })
    } catch {
      throw BackupError(.badData, "\(backup)/Manifest.db: \(error)")
    }
  }

  /// A file of the backup's top level, read whole, or nil when there is none.
  private func member(_ name: String, limit: Int) throws(BackupError) -> [UInt8]? {
    let fd: Int32
    do throws(Errno) {
      fd = try asReader { () throws(Errno) in
        try Sys.openat(backupFD, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
      }
    } catch  where error == .noEntry {
      return nil
    } catch {
      throw BackupError(.badData, "cannot open \(backup)/\(name) (a symlink?): \(error)")
    }
    defer { Sys.close(fd) }
    let status: stat
    do throws(Errno) { status = try Sys.fstat(fd) } catch {
      throw BackupError(.system, "cannot look at \(backup)/\(name): \(error)")
    }
    guard status.st_mode & S_IFMT == S_IFREG, status.st_size <= limit else {
      throw BackupError(.badData, "\(backup)/\(name) is not a file of at most \(ByteCount(Int64(limit)).formatted)")
    }
    do throws(Errno) { return try Sys.readToEnd(fd, limit: limit) } catch {
      throw BackupError(.system, "cannot read \(backup)/\(name): \(error)")
    }
  }

  // MARK: - Restoring

  /// Restores `domain` of `database` into `target`, which must not exist or be empty.
  /// - Parameter capacity: the capacity of the sandbox to be mounted there, if given: a
  ///   restore that would use more is refused.
  public func restore(_ database: ManifestDatabase, domain: String, into target: TargetDirectory, capacity: Int64?)
    throws(BackupError) -> Summary
  {
    summary = Summary()
    try StagingDirectory.checkNewOrEmpty(target, verb: "restore")
    let space = try spaceAvailable(in: target)
    blockSize = space.blockSize
    var needed = RestoreSpace(blockSize: blockSize)
    let prepared = try prepare(database, domain: domain, kind: .app, prefix: [], &needed)
    let staging = try stagingIfItFits(needed, space, capacity: capacity, target: target)
    do throws(BackupError) {
      try write(prepared, database, into: staging.fd, path: staging.path, recordsDefault: true)
      try staging.commit()
    } catch {
      throw error.adding(staging.discard())
    }
    return summary
  }

  /// One domain, checked and measured (the first pass), ready to write.
  private struct Prepared {
    let plan: RestorePlan
    let checked: [Checked]
  }

  /// The first pass over `domain`, restored into a container of `kind` at `prefix` below
  /// the target: every row, record and file checked, the space it takes added to `space`.
  /// Writes nothing.
  private func prepare(
    _ database: ManifestDatabase, domain: String, kind: ContainerKind, prefix: [[UInt8]], _ space: inout RestoreSpace
  ) throws(BackupError) -> Prepared {
    let rows: [RestorePlan.Row]
    do throws(ManifestDatabase.Failure) { rows = try database.entries(domain: domain) } catch {
      throw BackupError(.badData, "\(backup)/Manifest.db: \(error)")
    }
    let plan: RestorePlan
    do throws(RestoreProblem) { plan = try RestorePlan(rows, kind: kind) } catch {
      throw BackupError(.badData, "bad backup: \(error)")
    }
    summary.skipped += plan.skipped
    let descriptors = ResourceLimits.raiseOpenFiles()
    guard UInt64(plan.depth) + Self.spareDescriptors <= descriptors else {
      throw BackupError(
        .system,
        "the backup nests \(plan.depth) directories deep; a restore holds one descriptor per level, and this process may open \(descriptors) (ulimit -n)"
      )
    }
    let checked = try check(plan, database, prefix: prefix, &space)
    return Prepared(plan: plan, checked: checked)
  }

  /// The second pass: makes the container's layout in the directory `fd` (at `path`,
  /// for messages) and its items. `recordsDefault`: the directory is a backing root,
  /// which records the container default class.
  private func write(
    _ prepared: Prepared, _ database: ManifestDatabase, into fd: Int32, path: String, recordsDefault: Bool
  ) throws(BackupError) {
    (stack, directoryRows, restoredInodes) = ([], [], [:])
    rootFD = fd
    do throws(BackupError) {
      try makeLayout(prepared.plan.kind, recordsDefault: recordsDefault)
      for (index, item) in prepared.plan.items.enumerated() where !prepared.checked[index].excluded {
        try restore(item, prepared.checked[index], database)
        progress?(summary.files + summary.directories + summary.symlinks, summary.bytes)
      }
      closeDirectories(keeping: 0)
      try applyDirectoryModes()
      do throws(Errno) { try Sys.fchmod(rootFD, rootMode) } catch {
        throw BackupError(.system, "cannot set the mode of \(path): \(error)")
      }
    } catch {
      closeDirectories(keeping: 0)
      throw error
    }
  }

  /// One container of a device restore: its kind, id and domain, and an app's groups.
  public struct DeviceContainer: Sendable {
    public var kind: ContainerKind
    public var id: ContainerIdentifier
    public var domain: String
    public var groups: [ContainerIdentifier]

    /// A container; see the properties.
    public init(kind: ContainerKind, id: ContainerIdentifier, domain: String, groups: [ContainerIdentifier] = []) {
      self.kind = kind
      self.id = id
      self.domain = domain
      self.groups = groups
    }
  }

  /// Refuses containers that would not make a device a mount takes (docs/reference.md#a-device):
  /// an app or a group twice, an id both an app's and a group's (an app naming another app, or
  /// itself, as a group), a group no restored app names. A crafted `Manifest.plist` could
  /// ask for any of these; restored, the device would be refused at every mount.
  static func checkConsistent(_ containers: [DeviceContainer]) throws(BackupError) {
    var apps = DeviceApps()
    for container in containers where container.kind == .app {
      do throws(DeviceApps.Refusal) { try apps.install(container.id, groups: container.groups) } catch {
        throw BackupError(.badData, "the backup's app \(container.id): \(error)")
      }
    }
    let named = apps.groups
    var seen: Set<ContainerIdentifier> = []
    for container in containers where container.kind == .group {
      if !seen.insert(container.id).inserted {
        throw BackupError(.badData, "the backup's group \(container.id) is restored twice")
      }
      if apps.isInstalled(container.id) {
        throw BackupError(.badData, "the backup's group \(container.id) is also an app's bundle id")
      }
      if named[container.id] == nil {
        throw BackupError(.badData, "the backup's group \(container.id) has no member among the restored apps")
      }
    }
  }

  /// Restores `containers` into `target` (new or empty) as a device's backing directory
  /// (docs/reference.md#a-device): each in its place under `Containers/`, with its
  /// metadata file, every check and the space of them all first, then everything built in
  /// one staging directory renamed into place at the end.
  /// - Parameter capacity: the capacity of the device to be mounted there, if given.
  /// - Throws: ``BackupError`` (`badData` for containers that would not make a device).
  public func restoreDevice(
    _ database: ManifestDatabase, containers: [DeviceContainer], into target: TargetDirectory, capacity: Int64?
  ) throws(BackupError) -> Summary {
    summary = Summary()
    try Self.checkConsistent(containers)
    try StagingDirectory.checkNewOrEmpty(target, verb: "restore")
    let space = try spaceAvailable(in: target)
    blockSize = space.blockSize
    // The device's own directories, and each container's root and fixed directories.
    var needed = RestoreSpace(
      blockSize: blockSize,
      directories: DeviceLayout.creationOrder.map(\.components)
        + containers.flatMap { container in
          let root = DeviceLayout.components(of: container.kind, container.id)
          return [root] + container.kind.fixedDirectories.map { root + $0.components }
        })
    var prepared: [Prepared] = []
    var metadata: [ContainerMetadata] = []
    for container in containers {
      let root = DeviceLayout.components(of: container.kind, container.id)
      prepared.append(
        try prepare(database, domain: container.domain, kind: container.kind, prefix: root, &needed))
      let made = ContainerMetadata(
        identifier: container.id, kind: container.kind, groups: container.groups, uuid: BackupPlists.randomUUID())
      needed.addFile(root + [DeviceLayout.metadataFileName], bytes: Int64(made.encoded.count))
      metadata.append(made)
    }
    let staging = try stagingIfItFits(needed, space, capacity: capacity, target: target)
    do throws(BackupError) {
      do throws(Errno) {
        for directory in DeviceLayout.creationOrder {
          Sys.close(try DeviceBacking.makeDirectories(directory.components, in: staging.fd))
        }
        try Xattr.set(
          staging.fd, name: DefaultProtection.attributeName, value: Array(ProtectionClass.containerDefault.name.utf8))
      } catch {
        throw BackupError(.system, "cannot make the device's directories: \(error)")
      }
      for (index, container) in containers.enumerated() {
        let components = DeviceLayout.components(of: container.kind, container.id)
        let shown = staging.path + "/" + components.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
        let fd: Int32
        do throws(Errno) {
          let parent = try DeviceBacking.makeDirectories(container.kind.parentComponents, in: staging.fd)
          defer { Sys.close(parent) }
          fd = try makeDirectory(
            parent, (container.id.bytes + [0]).map { CChar(bitPattern: $0) }, mode: 0o755, existing: false)
        } catch {
          throw BackupError(.system, "cannot make \(shown): \(error)")
        }
        defer { Sys.close(fd) }
        try write(prepared[index], database, into: fd, path: shown, recordsDefault: false)
        do throws(Errno) {
          let file = try Sys.openat(
            fd, (DeviceLayout.metadataFileName + [0]).map { CChar(bitPattern: $0) },
            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
          defer { Sys.close(file) }
          try Sys.writeAll(file, metadata[index].encoded)
        } catch {
          throw BackupError(.system, "cannot write the metadata of \(shown): \(error)")
        }
      }
      try staging.commit()
    } catch {
      throw error.adding(staging.discard())
    }
    return summary
  }

  /// The app and group domains of the backup, and each app's groups as its `Manifest.plist`
  /// lists them (AppBox's backups of a device; a device's own backups do not say).
  public func deviceDomains(_ database: ManifestDatabase) throws(BackupError) -> (
    apps: [String], groups: [String], members: [String: [String]]
  ) {
    let domains: [String]
    do throws(ManifestDatabase.Failure) { domains = try database.domains() } catch {
      throw BackupError(.badData, "\(backup)/Manifest.db: \(error)")
    }
    let manifest = try member(BackupLayout.manifest, limit: Self.manifestLimit) ?? []
    return (
      domains.compactMap(BackupRules.bundleID(ofDomain:)).sorted(),
      domains.compactMap(BackupRules.groupID(ofDomain:)).sorted(), BackupPlists.groups(manifest: manifest)
    )
  }

  // MARK: - First pass: check, write nothing

  /// Reads every record and every file's bytes of the plan, checks them, decides what is
  /// excluded and what is a hard link, and adds up what the restore will write
  /// (``RestoreSpace``), its items at `prefix` below the target.
  private func check(
    _ plan: RestorePlan, _ database: ManifestDatabase, prefix: [[UInt8]], _ space: inout RestoreSpace
  ) throws(BackupError) -> [Checked] {
    var checked: [Checked] = []
    checked.reserveCapacity(plan.items.count)
    var excludedDirectory: [[UInt8]]?
    var lastOfInode: [UInt64: Int64] = [:]
    for item in plan.items {
      if let excludedDirectory, item.components.starts(with: excludedDirectory) {
        checked.append(Checked(excluded: true))
        continue
      }
      excludedDirectory = nil
      let (record, protection) = try record(of: item, database)
      var entry = Checked(size: record.size, inode: record.inode)
      if BackupRules.exclusion(record.extendedAttributes) != nil {
        summary.excluded += 1
        entry.excluded = true
        if item.kind == .directory { excludedDirectory = item.components }
        checked.append(entry)
        continue
      }
      entry.extraBlocks = Self.extraBlocks(record, protection, blockSize: space.blockSize)
      switch item.kind {
      case .directory:
        space.addDirectory(prefix + item.components)
        space.addAttributes(blocks: entry.extraBlocks)
      case .symlink:
        space.addSymlink(prefix + item.components, targetLength: record.target?.count ?? 0)
      case .file:
        if record.inode != 0, lastOfInode[record.inode] == record.size {
          // Another name of a file counted before: its attributes are that file's.
          entry.linked = true
          space.addLink(prefix + item.components)
        } else {
          let source = try openContent(item, size: record.size)
          defer { Sys.close(source) }
          let measure: SparseCopy.Measure
          do throws(Errno) {
            measure = try SparseCopy.measure(source, count: record.size, blockSize: space.blockSize)
          } catch {
            throw BackupError(
              .system, "cannot read \(backup)/\(BackupLayout.contentPath(fileID: item.row.fileID)): \(error)")
          }
          entry.data = measure.data
          space.addFile(prefix + item.components, data: measure)
          space.addAttributes(blocks: entry.extraBlocks)
          if record.inode != 0 { lastOfInode[record.inode] = record.size }
        }
      }
      checked.append(entry)
    }
    return checked
  }

  /// The blocks an item's attributes and class, or a symlink's target, take
  /// (``RestoreSpace``).
  private static func extraBlocks(_ record: BackupFileRecord, _ protection: ProtectionClass?, blockSize: Int64)
    -> Int64
  {
    // A restore sets no attribute on a symlink.
    guard record.kind != .symlink else { return RestoreSpace.symlinkBlocks(targetLength: record.target?.count ?? 0) }
    let bytes = RestoreSpace.attributeBytes(RestoreSpace.restoredAttributes(record, protection))
    return RestoreSpace.attributeBlocks(bytes, blockSize: blockSize)
  }

  /// The record of an item, decoded and checked against its row.
  private func record(of item: RestorePlan.Item, _ database: ManifestDatabase) throws(BackupError) -> (
    BackupFileRecord, ProtectionClass?
  ) {
    let path = RestorePlan.text(item.row.relativePath)
    let bytes: [UInt8]
    do throws(ManifestDatabase.Failure) { bytes = try database.record(rowID: item.row.rowID) } catch {
      throw BackupError(.badData, "bad backup: \(path): \(error)")
    }
    let record: BackupFileRecord
    do throws(BackupFileRecord.ReadError) {
      record = try BackupFileRecord.unarchive(bytes, relativePath: item.row.relativePath, flags: item.row.flags)
    } catch {
      throw BackupError(.badData, "bad backup: \(path): \(error)")
    }
    do throws(RestoreProblem) { return (record, try RestorePlan.check(record)) } catch {
      throw BackupError(.badData, "bad backup: \(error)")
    }
  }

  /// A file's bytes in the backup, opened without following a symlink on the way, and
  /// checked to be a regular file of `size` bytes, the size its record says.
  private func openContent(_ item: RestorePlan.Item, size: Int64) throws(BackupError) -> Int32 {
    let fileID = item.row.fileID
    let path = RestorePlan.text(item.row.relativePath)
    let fd: Int32
    do throws(Errno) {
      let bucket = try bucketFD(String(fileID.prefix(2)))
      fd = try asReader { () throws(Errno) in
        try Sys.openat(bucket, fileID, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
      }
    } catch  where error == .tooManySymlinks || error == .notDirectory {
      throw BackupError(
        .badData, "bad backup: the bytes of \(path) (\(fileID)) are behind a symlink, not in the backup")
    } catch {
      throw BackupError(.badData, "bad or truncated backup: the bytes of \(path) (\(fileID)) are missing: \(error)")
    }
    do throws(BackupError) {
      let status: stat
      do throws(Errno) { status = try Sys.fstat(fd) } catch {
        throw BackupError(.system, "cannot look at the bytes of \(path) (\(fileID)): \(error)")
      }
      guard status.st_mode & S_IFMT == S_IFREG else {
        throw BackupError(.badData, "bad backup: the bytes of \(path) (\(fileID)) are not a regular file")
      }
      guard Int64(status.st_size) == size else {
        throw BackupError(
          .badData,
          "bad or truncated backup: \(path) (\(fileID)) holds \(status.st_size) bytes, the manifest says \(size)")
      }
      return fd
    } catch {
      Sys.close(fd)
      throw error
    }
  }

  private func bucketFD(_ name: String) throws(Errno) -> Int32 {
    if let fd = buckets[name] { return fd }
    let fd = try asReader { () throws(Errno) in
      try Sys.openat(backupFD, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    }
    buckets[name] = fd
    return fd
  }

  /// Runs `body` (an open in the backup) with the backup's owner's filesystem credentials
  /// when root reads another user's backup, else as it is. What is read is then read
  /// through the descriptors opened.
  private func asReader<R>(_ body: () throws(Errno) -> R) throws(Errno) -> R {
    guard let reader else { return try body() }
    return try reader.asFilesystemUser(body)
  }

  /// The free space and inodes of the filesystem the target goes on.
  private func spaceAvailable(in target: TargetDirectory) throws(BackupError) -> (
    blockSize: Int64, free: Int64, inodes: Int64?
  ) {
    do throws(Errno) {
      let st = try Sys.fstatvfs(target.parentFD)
      let blockSize = max(Int64(st.f_frsize), 512)
      let free = Int64(clamping: UInt64(st.f_bavail).multipliedReportingOverflow(by: UInt64(st.f_frsize)).partialValue)
      // A filesystem that reports no inode total has no inode limit.
      return (blockSize, free, st.f_files == 0 ? nil : Int64(clamping: UInt64(st.f_favail)))
    } catch {
      throw BackupError(.unusablePath, "cannot measure the free space of \(target.parent): \(error)")
    }
  }

  /// The staging directory for `target`, once the restore's estimate (`needed`, kept in
  /// the summary) is known to fit the capacity and `space`.
  private func stagingIfItFits(
    _ needed: RestoreSpace, _ space: (blockSize: Int64, free: Int64, inodes: Int64?), capacity: Int64?,
    target: TargetDirectory
  ) throws(BackupError) -> StagingDirectory {
    let estimate = needed.total()
    summary.spaceNeeded = estimate.bytes
    try refuseUnlessItFits(estimate, space, capacity: capacity, target: target)
    hooks.checked?()
    let staging = try StagingDirectory(for: target, purpose: "restore", verb: "restore")
    hooks.stagingMade?(staging.path)
    return staging
  }

  private func refuseUnlessItFits(
    _ needed: (bytes: Int64, items: Int64), _ space: (blockSize: Int64, free: Int64, inodes: Int64?),
    capacity: Int64?, target: TargetDirectory
  ) throws(BackupError) {
    let what =
      "the restore needs about \(ByteCount(needed.bytes).formatted) (as du will count it: the files' data as the backup holds it, holes left out, directories, attributes; docs/reference.md)"
    if let capacity, needed.bytes > capacity {
      throw BackupError(
        .badData, "\(what), more than the sandbox's capacity \(ByteCount(capacity).formatted) (--capacity)")
    }
    if needed.bytes > space.free {
      throw BackupError(
        .system,
        "\(what), but the filesystem of \(target.parent) has \(ByteCount(space.free).formatted) free: make room or restore elsewhere"
      )
    }
    if let inodes = space.inodes, needed.items > inodes {
      throw BackupError(
        .system,
        "the restore makes \(needed.items) files and directories, but the filesystem of \(target.parent) has room for \(inodes) more"
      )
    }
  }

  // MARK: - Second pass: write

  private func restore(_ item: RestorePlan.Item, _ checked: Checked, _ database: ManifestDatabase) throws(BackupError) {
    let (record, protection) = try record(of: item, database)
    guard record.size == checked.size, record.inode == checked.inode,
      BackupRules.exclusion(record.extendedAttributes) == nil,
      Self.extraBlocks(record, protection, blockSize: blockSize) <= checked.extraBlocks
    else {
      throw BackupError(.badData, "bad backup: \(RestorePlan.text(record.relativePath)) changed during the restore")
    }
    let components = item.components
    let parentFD = try openParent(of: components)
    let name = (components[components.count - 1] + [0]).map { CChar(bitPattern: $0) }
    if record.mode & 0o6000 != 0, record.kind != .symlink { summary.setIDDropped += 1 }
    switch record.kind {
    case .directory:
      let existing = RestorePlan.layoutDirectories(of: rootKind).contains(components)
      let fd: Int32
      do throws(Errno) {
        // The sandbox's own directories are made first; a row may only describe them.
        fd = try makeDirectory(parentFD, name, mode: 0o700, existing: existing)
      } catch {
        throw BackupError(.system, "cannot make the directory \(RestorePlan.text(record.relativePath)): \(error)")
      }
      stack.append((components[components.count - 1], fd))
      directoryRows.append((components, Self.restoredMode(record.mode), record.lastModified))
      try setAttributes(fd, record, protection)
      summary.directories += 1
    case .symlink:
      do throws(Errno) {
        try Sys.symlinkat(((record.target ?? []) + [0]).map { CChar(bitPattern: $0) }, parentFD, name)
        let fd = try Sys.openat(parentFD, name, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
        defer { Sys.close(fd) }
        let time = timespec(tv_sec: Int(record.lastModified), tv_nsec: 0)
        try Sys.utimens(fd, isSymlink: true, (time, time))
      } catch {
        throw BackupError(.system, "cannot restore the symlink \(RestorePlan.text(record.relativePath)): \(error)")
      }
      summary.symlinks += 1
    case .file:
      try restoreFile(record, protection, checked, components: components, parentFD: parentFD, name: name, item)
    }
  }

  private func restoreFile(
    _ record: BackupFileRecord, _ protection: ProtectionClass?, _ checked: Checked, components: [[UInt8]],
    parentFD: Int32, name: [CChar], _ item: RestorePlan.Item
  ) throws(BackupError) {
    let path = RestorePlan.text(record.relativePath)
    summary.files += 1
    summary.bytes.addSaturating(record.size)
    if checked.linked, let first = restoredInodes[record.inode], first.size == record.size {
      do throws(Errno) {
        let existing = try openBeneath(first.components)
        defer { Sys.close(existing) }
        try Sys.link(existing, parentFD, name)
        return
      } catch {
        throw BackupError(.system, "cannot link \(path): \(error)")
      }
    }
    let source = try openContent(item, size: record.size)
    defer { Sys.close(source) }
    let out: Int32
    do throws(Errno) {
      out = try Sys.openat(parentFD, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    } catch {
      throw BackupError(.system, "cannot create \(path): \(error)")
    }
    defer { Sys.close(out) }
    let size: Int64
    let copied: SparseCopy.Result
    do throws(Errno) {
      size = Int64(try Sys.fstat(source).st_size)
      // No more data than the first pass counted: a file that grew or had its holes
      // filled since cannot fill the target's filesystem past the check.
      copied = try SparseCopy.copy(from: source, to: out, count: record.size, dataLimit: checked.data)
    } catch {
      throw BackupError(.system, "cannot restore \(path): \(error)")
    }
    guard size == record.size else {
      throw BackupError(
        .badData,
        "bad or truncated backup: \(path) (\(item.row.fileID)) holds \(size) bytes, the manifest says \(record.size)")
    }
    guard !copied.overLimit, copied.covered == record.size, copied.data <= checked.data else {
      throw BackupError(
        .badData,
        "bad backup: the bytes of \(path) (\(item.row.fileID)) changed during the restore (more data than the first pass counted, or fewer bytes)"
      )
    }
    try setAttributes(out, record, protection)
    if record.inode != 0 { restoredInodes[record.inode] = (components, record.size) }
  }

  /// Attributes, class, mode and (for files) times of a new file or directory.
  private func setAttributes(_ fd: Int32, _ record: BackupFileRecord, _ protection: ProtectionClass?)
    throws(BackupError)
  {
    let path = RestorePlan.text(record.relativePath)
    for (name, value) in record.extendedAttributes {
      guard let stored = RestorePlan.backingAttributeName(name) else { continue }
      do throws(Errno) {
        try Xattr.set(fd, name: String(decoding: stored, as: UTF8.self), value: value)
      } catch  where error == .outOfRange || error == .noSpace || error.rawValue == E2BIG {
        throw BackupError(
          .badData,
          "bad backup: the attribute \(RestorePlan.text(name)) of \(path) (\(value.count) bytes) does not fit on the target's filesystem: \(error)"
        )
      } catch {
        throw BackupError(.system, "cannot set the attribute \(RestorePlan.text(name)) of \(path): \(error)")
      }
    }
    do throws(Errno) {
      if let protection, protection != .containerDefault {
        try Xattr.set(fd, name: AppBoxAttribute.protection.name, value: Array(protection.name.utf8))
      }
      // A directory's mode waits until its contents are made (it may deny writing).
      guard record.kind == .file else { return }
      try Sys.fchmod(fd, Self.restoredMode(record.mode))
      let time = timespec(tv_sec: Int(record.lastModified), tv_nsec: 0)
      try Sys.futimens(fd, (time, time))
    } catch {
      throw BackupError(.system, "cannot set the class, mode or times of \(path): \(error)")
    }
  }

  /// The permission bits a restore gives an item: the record's, without set-user-ID and
  /// set-group-ID (ownership is not restored, as `tar --no-same-owner` does); the sticky
  /// bit stays.
  static func restoredMode(_ mode: UInt32) -> mode_t { mode_t(mode & 0o1777) }

  // MARK: - Directories

  /// The parent directory of `components`, opened (and made when the backup has no row
  /// for it) component by component without following symlinks.
  private func openParent(of components: [[UInt8]]) throws(BackupError) -> Int32 {
    let parent = components.dropLast()
    var common = 0
    while common < stack.count, common < parent.count, stack[common].name == parent[parent.startIndex + common] {
      common += 1
    }
    closeDirectories(keeping: common)
    for component in parent.dropFirst(common) {
      let at = stack.last?.fd ?? rootFD
      let name = (component + [0]).map { CChar(bitPattern: $0) }
      do throws(Errno) {
        stack.append((component, try makeDirectory(at, name, mode: 0o755, existing: true)))
      } catch {
        throw BackupError(
          .badData,
          "bad backup: cannot make the directory \(RestorePlan.text(Array(components.joined(separator: [0x2F])))): \(error)"
        )
      }
    }
    return stack.last?.fd ?? rootFD
  }

  /// Closes open directories down to `count`.
  private func closeDirectories(keeping count: Int) {
    while stack.count > count { Sys.close(stack.removeLast().fd) }
  }

  /// Gives every directory made from a row its recorded mode and time, once everything
  /// is restored: the deepest first (in the reverse of the order they were made), so each
  /// is reached through parents still open to the user. The directories on the way stay
  /// open from one to the next, as in the first pass, so a deep tree costs no more.
  private func applyDirectoryModes() throws(BackupError) {
    var open: [(name: [UInt8], fd: Int32)] = []
    defer { for entry in open { Sys.close(entry.fd) } }
    for (components, mode, seconds) in directoryRows.reversed() {
      let time = timespec(tv_sec: Int(seconds), tv_nsec: 0)
      do throws(Errno) {
        var common = 0
        while common < open.count, common < components.count, open[common].name == components[common] { common += 1 }
        while open.count > common { Sys.close(open.removeLast().fd) }
        for component in components[common...] {
          let at = open.last?.fd ?? rootFD
          let name = (component + [0]).map { CChar(bitPattern: $0) }
          open.append((component, try Sys.openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)))
        }
        let fd = open[components.count - 1].fd
        try Sys.fchmod(fd, mode)
        try Sys.futimens(fd, (time, time))
      } catch {
        throw BackupError(
          .system,
          "cannot set the mode and times of \(RestorePlan.text(Array(components.joined(separator: [0x2F])))): \(error)")
      }
    }
  }

  /// Makes the directory `name` in `at` with `mode` (less the umask), or finds it when
  /// `existing`, and opens it without following a symlink (``Directory/open(_:_:)``).
  private func makeDirectory(_ at: Int32, _ name: [CChar], mode: mode_t, existing: Bool) throws(Errno) -> Int32 {
    do throws(Errno) {
      try Sys.mkdirat(at, name, mode)
    } catch  where existing && error == .exists {}
    return try Directory.open(at, name)
  }

  /// Opens a restored item (`O_PATH`) by its components, each without following symlinks.
  private func openBeneath(_ components: [[UInt8]]) throws(Errno) -> Int32 {
    try Directory.walk(from: try Sys.dup(rootFD), components) { last in
      last ? Linux.openPath | O_NOFOLLOW | O_CLOEXEC : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
    }
  }

  /// The container's fixed directories (Caches and tmp empty) and, for a backing root,
  /// its default class.
  private func makeLayout(_ kind: ContainerKind, recordsDefault: Bool) throws(BackupError) {
    rootKind = kind
    do throws(Errno) {
      // One component at a time, each through its parent's descriptor (the layout
      // lists parents first).
      var opened: [[[UInt8]]: Int32] = [[]: rootFD]
      defer { for (components, fd) in opened where !components.isEmpty { Sys.close(fd) } }
      for directory in kind.fixedDirectories {
        let components = directory.components
        guard let parent = opened[Array(components.dropLast())] else { throw Errno.noEntry }
        let fd = try makeDirectory(
          parent, (components[components.count - 1] + [0]).map { CChar(bitPattern: $0) }, mode: 0o755, existing: false)
        opened[components] = fd
        if directory == kind.fixedDirectories[0] { rootMode = mode_t(try Sys.fstat(fd).st_mode & 0o777) }
      }
      if recordsDefault {
        try Xattr.set(
          rootFD, name: DefaultProtection.attributeName, value: Array(ProtectionClass.containerDefault.name.utf8))
      }
    } catch {
      throw BackupError(.system, "cannot make the sandbox's directories: \(error)")
    }
  }
}
