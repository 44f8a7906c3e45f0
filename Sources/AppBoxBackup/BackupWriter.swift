import AppBoxFS
import Posix
import PropertyLists
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

/// What a backup or a restore tells as it goes: items and bytes so far.
public typealias BackupProgress = (_ items: Int, _ bytes: Int64) -> Void

/// Walks a sandbox's backing directory and writes what a device backup of the app holds,
/// in the layout of an unencrypted iOS backup (`Manifest.db`, the plists, each file's
/// bytes at `<fileID[0:2]>/<fileID>`), or, for a dry run, only counts it.
///
/// It reads the backing directory, not the mount: a locked device still backs up its
/// class-A files (the backup carries them as they are), so no Data Protection refusal
/// may stop a backup, and the backing keeps every attribute under its stored name. The
/// daemon writes every change straight to the backing files (there is no write-back
/// cache), so what is read there is what programs on the mount see.
///
/// A backup is private to the user who makes it, whatever the modes of what it holds:
/// it is built in a staging directory of mode 0700 and every file in it (copies,
/// `Manifest.db`, the plists) has mode 0600, whatever the umask. Holes of sparse files
/// stay holes in the copies.
public final class BackupWriter {
  /// One container a backup holds: its domain, where it is below the backing directory
  /// (a plain sandbox's is the root) and what kind it is (which says what is backed up).
  private struct Source {
    /// `AppDomain-<bundle id>` or `AppDomainGroup-<group id>`.
    var domain: String
    /// Its root's path components below the backing directory.
    var components: [[UInt8]]
    /// An app's or a group's.
    var kind: ContainerKind
  }

  private let backing: String
  /// The sandbox's owner, when it is another user's: what is read is read with their
  /// rights (``init(backing:owner:bundleID:dryRun:progress:)``).
  private let owner: UserCredentials?
  /// Whether the backing directory is a device's: its apps and groups are read from it
  /// when the backup runs.
  private let device: Bool
  /// The apps the plists name, with their groups.
  private var apps: [(bundleID: String, groups: [String])]
  private var sources: [Source]
  /// The container being walked: its domain, kind and path (the report's paths start
  /// with it on a device).
  private var domain = ""
  private var kind = ContainerKind.app
  private var prefix: [[UInt8]] = []
  private let dryRun: Bool
  private let progress: BackupProgress?
  /// Where tests act as a racing user would.
  var hooks = EngineHooks()
  private var rootDefault = ProtectionClass.containerDefault
  private var report = BackupReport()

  private var database: ManifestDatabase?
  /// The status of `Manifest.db` when it was made, to know it again.
  private var databaseFile: stat?
  /// The rows inserted into `Manifest.db`, by domain.
  private var rowsWritten: [String: Int64] = [:]
  private var staging: StagingDirectory?
  private var outFD: Int32 { staging?.fd ?? -1 }
  private var buckets: [String: Int32] = [:]
  /// The copy of each hard-linked inode already written: (device, inode) → file id.
  private var linkCopies: [InodeKey: (fileID: String, size: Int64)] = [:]

  private struct InodeKey: Hashable {
    let device: UInt64
    let inode: UInt64
  }

  /// How often a file that changes while it is copied is copied again.
  static let copyAttempts = 4

  /// A writer for the backing directory `backing`, of the app `bundleID`; a dry run only
  /// counts. `progress` is told the items and bytes so far, now and then.
  /// - Parameter owner: the user whose sandbox it is, when that is not the caller (root
  ///   backing up another user's mount, whose daemon named `backing`): `backing` must be
  ///   an absolute path without symlinks to a directory of that user's, and everything in
  ///   the sandbox is looked up, opened and read with that user's filesystem credentials
  ///   (docs/reference.md, "Trust model of backup and restore"). nil: the caller's own
  ///   sandbox, or one the caller named; `backing` is opened as it is, with the caller's
  ///   rights.
  public init(
    backing: String, owner: UserCredentials? = nil, bundleID: String, dryRun: Bool, progress: BackupProgress? = nil
  ) {
    self.backing = backing
    self.owner = owner
    self.device = false
    self.apps = [(bundleID, [])]
    self.sources = [Source(domain: BackupRules.domain(bundleID: bundleID), components: [], kind: .app)]
    self.dryRun = dryRun
    self.progress = progress
  }

  /// A writer for a device's backing directory (docs/reference.md#a-device): one domain
  /// per app and per App Group, as the containers' metadata files say when the backup
  /// runs (read through the backing directory's descriptor, with `owner`'s credentials
  /// when it is another user's, as everything else); `Manifest.plist` lists every app with
  /// its groups. `owner` as for ``init(backing:owner:bundleID:dryRun:progress:)``.
  public init(device backing: String, owner: UserCredentials? = nil, dryRun: Bool, progress: BackupProgress? = nil) {
    self.backing = backing
    self.owner = owner
    self.device = true
    self.apps = []
    self.sources = []
    self.dryRun = dryRun
    self.progress = progress
  }

  deinit {
    for fd in buckets.values { Sys.close(fd) }
  }

  /// Walks the sandbox and, unless a dry run, writes the backup into `destination` (made
  /// in a staging directory beside it, renamed into place when complete).
  public func run(destination: TargetDirectory?) throws(BackupError) -> BackupReport {
    let rootFD = try asOwner { () throws(BackupError) in try openBacking() }
    defer { Sys.close(rootFD) }
    // A recorded default that names no class refuses the backup as it refuses a mount:
    // the class of the items without one is unknown (docs/reference.md, Data Protection).
    rootDefault = try asOwner { () throws(BackupError) in
      switch DefaultProtection.record(rootFD: rootFD) {
      case .absent: return .containerDefault
      case .valid(let protectionClass): return protectionClass
      case .unparsable(let value):
        throw BackupError(.badData, "\(backing): \(SandboxSetupError.unknownDefaultProtection(value: value))")
      case .unreadable(let errno):
        throw BackupError(.system, "cannot read \(backing)'s default class: \(Errno(rawValue: errno))")
      }
    }
    // A tree deeper than the descriptor limit would fail half-way.
    ResourceLimits.raiseOpenFiles()
    if let destination {
      let made = try StagingDirectory(for: destination, purpose: "backup", verb: "back up")
      staging = made
      hooks.stagingMade?(made.path)
    }
    do throws(BackupError) {
      if device { try readDevice(rootFD) }
      if let staging { database = try createDatabase(in: staging) }
      for source in sources {
        (domain, kind) = (source.domain, source.kind)
        prefix = source.components
        let fd = try asOwner { () throws(BackupError) in try openContainer(rootFD, source.components) }
        defer { Sys.close(fd) }
        try walk(fd)
      }
      if let staging {
        try finishDatabase()
        hooks.databaseWritten?(staging.path)
        try checkDatabase(in: staging)
        try writePlists()
        try staging.commit()
      }
    } catch {
      database = nil
      throw error.adding(staging?.discard())
    }
    return report
  }

  // MARK: - Source

  /// The backing directory, opened. The caller's own is opened as its path names it. Another
  /// user's (`owner`) is opened one component at a time from `/` without following a
  /// symlink (a backing directory replaced by a symlink, or a path through one, is
  /// refused), and must be a directory that user owns: the daemon that named it is theirs,
  /// and could name anything.
  private func openBacking() throws(BackupError) -> Int32 {
    guard let owner else {
      do throws(Errno) {
        return try Sys.openat(AT_FDCWD, backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      } catch {
        throw BackupError(.unusablePath, "cannot open the backing directory \(backing): \(error)")
      }
    }
    let whose = "uid \(owner.uid)'s sandbox"
    let fd: Int32
    do throws(Errno) {
      fd = try Directory.openWithoutSymlinks(backing)
    } catch  where error == .tooManySymlinks || error == .notDirectory || error == .invalidArgument {
      throw BackupError(
        .notPermitted,
        "the backing directory \(backing) of \(whose) is not a directory reached without symlinks: not backed up")
    } catch  where error == .accessDenied {
      throw BackupError(
        .notPermitted, "the backing directory \(backing) of \(whose) is not open to that user: not backed up")
    } catch {
      throw BackupError(.unusablePath, "cannot open the backing directory \(backing) of \(whose): \(error)")
    }
    let status: stat
    do throws(Errno) { status = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw BackupError(.system, "cannot look at the backing directory \(backing): \(error)")
    }
    guard status.st_uid == owner.uid else {
      Sys.close(fd)
      throw BackupError(
        .notPermitted,
        "the backing directory \(backing) of \(whose) belongs to uid \(status.st_uid), not to the sandbox's owner: not backed up"
      )
    }
    return fd
  }

  /// Runs `body` with the thread's filesystem credentials of the sandbox's owner when the
  /// sandbox is another user's (everything that looks up, opens or reads in it), else as
  /// it is.
  private func asOwner<R>(_ body: () throws(BackupError) -> R) throws(BackupError) -> R {
    guard let owner else { return try body() }
    var outcome: Result<R, BackupError>?
    do throws(Errno) {
      try owner.asFilesystemUser { () throws(Errno) in
        do throws(BackupError) { outcome = .success(try body()) } catch { outcome = .failure(error) }
      }
    } catch {
      throw BackupError(.system, "cannot take uid \(owner.uid)'s filesystem credentials to read the sandbox: \(error)")
    }
    guard let outcome else { throw BackupError(.system, "uid \(owner.uid)'s sandbox was not read") }
    return try outcome.get()
  }

  /// The device's apps and groups, read from the containers' metadata through `rootFD`
  /// (under the owner's credentials): the sources to walk and the plists' apps.
  private func readDevice(_ rootFD: Int32) throws(BackupError) {
    let found = try asOwner { () throws(BackupError) -> DeviceApps in
      do throws(DeviceBacking.Problem) { return try DeviceBacking.apps(rootFD: rootFD) } catch {
        throw BackupError(.badData, "cannot back up the device in \(backing): \(error)")
      }
    }
    sources =
      found.apps.keys.sorted().map {
        Source(
          domain: BackupRules.domain(bundleID: $0.name), components: DeviceLayout.components(of: .app, $0), kind: .app)
      }
      + found.groups.keys.sorted().map {
        Source(
          domain: BackupRules.groupDomain(groupID: $0.name), components: DeviceLayout.components(of: .group, $0),
          kind: .group)
      }
    apps = found.apps.sorted { $0.key < $1.key }.map { ($0.key.name, $0.value.map(\.name)) }
  }

  /// A container's directory, opened from `rootFD` one component at a time without
  /// following a symlink (the caller closes it; a plain sandbox's is the root itself).
  private func openContainer(_ rootFD: Int32, _ components: [[UInt8]]) throws(BackupError) -> Int32 {
    var fd: Int32
    do throws(Errno) { fd = try Sys.dup(rootFD) } catch {
      throw BackupError(.system, "cannot open \(backing): \(error)")
    }
    for (index, component) in components.enumerated() {
      do throws(Errno) {
        let next = try Sys.openat(
          fd, (component + [0]).map { CChar(bitPattern: $0) }, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        Sys.close(fd)
        fd = next
      } catch {
        Sys.close(fd)
        let shown = components[...index].map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
        throw BackupError(.system, "cannot open \(backing)/\(shown): \(error)")
      }
    }
    return fd
  }

  // MARK: - Destination

  /// `Manifest.db` in the staging directory, mode 0600, opened by SQLite through the
  /// staging directory's descriptor (``ManifestDatabase``), never by path.
  private func createDatabase(in staging: StagingDirectory) throws(BackupError) -> ManifestDatabase {
    do throws(ManifestDatabase.Failure) {
      let database = try ManifestDatabase(
        creating: BackupLayout.database, in: staging.fd, displayPath: "\(staging.path)/\(BackupLayout.database)")
      databaseFile = database.created
      return database
    } catch {
      throw BackupError(.system, error.description)
    }
  }

  private func finishDatabase() throws(BackupError) {
    do throws(ManifestDatabase.Failure) {
      try database?.commit()
      database = nil
    } catch {
      throw BackupError(.system, error.description)
    }
  }

  /// Reads the committed `Manifest.db` back, as a restore will: it must be the file made
  /// (not one renamed into its place) and hold every row written, each domain (every
  /// container's, on a device) with as many rows as were written to it. A backup that
  /// fails this is not reported as made.
  private func checkDatabase(in staging: StagingDirectory) throws(BackupError) {
    let what = "\(staging.path)/\(BackupLayout.database)"
    let fd: Int32
    let status: stat
    do throws(Errno) {
      fd = try Sys.openat(staging.fd, BackupLayout.database, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
      do throws(Errno) { status = try Sys.fstat(fd) } catch {
        Sys.close(fd)
        throw error
      }
    } catch {
      throw BackupError(.system, "cannot read \(what) back: \(error)")
    }
    guard let made = databaseFile, status.st_dev == made.st_dev, status.st_ino == made.st_ino else {
      Sys.close(fd)
      throw BackupError(.system, "\(what) is not the file the backup wrote: the backup is not kept")
    }
    defer { Sys.close(fd) }
    let counts: [String: Int64]
    do throws(ManifestDatabase.Failure) {
      counts = try ManifestDatabase(reading: fd, displayPath: what).rowCounts()
    } catch {
      throw BackupError(.system, "\(what) cannot be read back (\(error)): the backup is not kept")
    }
    guard counts == rowsWritten else {
      let found = counts.values.reduce(0, +)
      let written = rowsWritten.values.reduce(0, +)
      let differing = Set(counts.keys).union(rowsWritten.keys).sorted().filter { counts[$0] != rowsWritten[$0] }
      throw BackupError(
        .system,
        "\(what) holds \(found) rows, not the \(written) written (\(differing.map { "\($0): \(counts[$0] ?? 0) of \(rowsWritten[$0] ?? 0)" }.joined(separator: ", "))): the backup is not kept"
      )
    }
  }

  // MARK: - Walk

  /// A directory being walked: its entries' names, read first, then handled in turn.
  private struct Level {
    let stream: DirectoryStream
    let components: [[UInt8]]
    var names: [[CChar]]
    var next = 0
  }

  /// Walks the tree below `rootFD` with a stack of open directories (no recursion: a
  /// deep tree cannot exhaust the thread's stack).
  private func walk(_ rootFD: Int32) throws(BackupError) {
    var stack = [try asOwner { () throws(BackupError) in try level(rootFD, components: []) }]
    while let top = stack.indices.last {
      guard stack[top].next < stack[top].names.count else {
        stack.removeLast()
        continue
      }
      let name = stack[top].names[stack[top].next]
      stack[top].next += 1
      let directoryFD = stack[top].stream.fd
      let path = stack[top].components + [name.dropLast().map { UInt8(bitPattern: $0) }]
      let scope = BackupRules.scope(of: path, in: kind)
      switch scope {
      case .outside: continue
      case .caches, .tmp:
        let (files, bytes) = try asOwner { () throws(BackupError) in try measure(directoryFD, name, path) }
        report.addNotBackedUp(scope, files: files, bytes: bytes)
      case .backedUp:
        if let directory = try item(directoryFD, name, path) {
          defer { Sys.close(directory) }
          stack.append(try asOwner { () throws(BackupError) in try level(directory, components: path) })
        }
      }
    }
  }

  /// The names in a directory (`.` and `..` left out), and a stream of its own.
  private func level(_ directoryFD: Int32, components: [[UInt8]]) throws(BackupError) -> Level {
    do throws(Errno) {
      let stream = try DirectoryStream(fd: try Sys.openat(directoryFD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC))
      var names: [[CChar]] = []
      while let item = try stream.next() {
        let name = Array(UnsafeBufferPointer(start: item.name, count: strlen(item.name) + 1))
        if name == [0x2E, 0] || name == [0x2E, 0x2E, 0] { continue }
        names.append(name)
      }
      return Level(stream: stream, components: components, names: names)
    } catch {
      throw failure("cannot list", components, error)
    }
  }

  /// Files and bytes below (or of) an entry that is not backed up (not counted deeper
  /// than a backup goes), walked with a stack of open directories.
  private func measure(_ directoryFD: Int32, _ name: [CChar], _ path: [[UInt8]]) throws(BackupError) -> (Int, Int64) {
    var total = (0, Int64(0))
    var stack: [(stream: DirectoryStream, path: [[UInt8]])] = []
    var next: (fd: Int32, name: [CChar], path: [[UInt8]])? = (directoryFD, name, path)
    while true {
      if let (fd, name, path) = next {
        next = nil
        let st: stat
        do throws(Errno) {
          st = try Sys.fstatat(fd, name, AT_SYMLINK_NOFOLLOW)
        } catch  where error == .noEntry {
          st = stat()  // removed meanwhile: nothing to count
        } catch {
          throw failure("cannot stat", path, error)
        }
        switch st.st_mode & S_IFMT {
        case S_IFREG:
          total.0 += 1
          total.1.addSaturating(Int64(st.st_size))
        case S_IFDIR where path.count < RestorePlan.maximumDepth:
          do throws(Errno) {
            let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | Linux.openNoAccessTime
            stack.append((try DirectoryStream(fd: try Sys.openat(fd, name, flags)), path))
          } catch  where error == .noEntry {
          } catch {
            throw failure("cannot list", path, error)
          }
        default: break
        }
      }
      guard let top = stack.last else { return total }
      let entry: DirectoryStream.Item?
      do throws(Errno) { entry = try top.stream.next() } catch { throw failure("cannot list", top.path, error) }
      guard let entry else {
        stack.removeLast()
        continue
      }
      let child = Array(UnsafeBufferPointer(start: entry.name, count: strlen(entry.name) + 1))
      if child == [0x2E, 0] || child == [0x2E, 0x2E, 0] { continue }
      next = (top.stream.fd, child, top.path + [child.dropLast().map { UInt8(bitPattern: $0) }])
    }
  }

  /// An item of the backed-up scope as the walk finds it in the sandbox: open, with its
  /// status and attributes (and a symlink's target).
  private struct Found {
    var fd: Int32
    var kind: BackupFileRecord.Kind
    /// Its status before and just after it was opened.
    var looked: stat
    var opened: stat
    var attributes: [(name: [UInt8], value: [UInt8])]
    var protection: ProtectionClass
    var target: [UInt8]?
  }

  /// Finds one item of the backed-up scope in the sandbox (under the owner's credentials,
  /// when the sandbox is another user's), and counts what exclusion leaves out.
  /// - Returns: nil for an item that is not backed up: removed meanwhile, replaced by
  ///   something else between the look and the open, not app data (a socket, a FIFO, a
  ///   device), nested too deep, or excluded (and counted).
  private func find(_ directoryFD: Int32, _ name: [CChar], _ path: [[UInt8]]) throws(BackupError) -> Found? {
    guard path.count <= RestorePlan.maximumDepth else {
      report.tooDeep.append(BackupReportPath.join(prefix + path))  // a restore would refuse the backup
      return nil
    }
    let st: stat
    do throws(Errno) {
      st = try Sys.fstatat(directoryFD, name, AT_SYMLINK_NOFOLLOW)
    } catch  where error == .noEntry {
      return nil  // removed meanwhile: as if it had never been there
    } catch {
      throw failure("cannot stat", path, error)
    }
    let type = st.st_mode & S_IFMT
    let kind: BackupFileRecord.Kind
    let flags: Int32
    switch type {
    case S_IFREG:
      (kind, flags) = (.file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | Linux.openNoAccessTime)
    case S_IFDIR:
      (kind, flags) = (.directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | Linux.openNoAccessTime)
    case S_IFLNK: (kind, flags) = (.symlink, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
    default: return nil  // sockets, FIFOs and devices are not app data a device backs up
    }
    let fd: Int32
    do throws(Errno) {
      fd = try Sys.openat(directoryFD, name, flags)
    } catch  where error == .noEntry {
      return nil
    } catch {
      throw failure("cannot open", path, error)
    }
    var found = false
    defer { if !found { Sys.close(fd) } }
    // Replaced between the look and the open (say by a FIFO): as if removed meanwhile.
    let opened: stat
    do throws(Errno) { opened = try Sys.fstat(fd) } catch { throw failure("cannot stat", path, error) }
    guard opened.st_mode & S_IFMT == type, opened.st_ino == st.st_ino else { return nil }
    let (attributes, protection) = try readAttributes(fd, path, isSymlink: kind == .symlink)
    if let exclusion = BackupRules.exclusion(attributes) {
      let (files, bytes) = try measure(directoryFD, name, path)
      report.addExcluded(prefix + path, by: exclusion, files: files, bytes: bytes)
      return nil
    }
    var target: [UInt8]?
    if kind == .symlink {
      do throws(Errno) { target = try Sys.readlink(fd) } catch { throw failure("cannot read the link", path, error) }
    }
    found = true
    return Found(
      fd: fd, kind: kind, looked: st, opened: opened, attributes: attributes, protection: protection, target: target)
  }

  /// Backs up (or counts) one item of the backed-up scope.
  /// - Returns: a directory's descriptor, to walk it (the caller closes it).
  private func item(_ directoryFD: Int32, _ name: [CChar], _ path: [[UInt8]]) throws(BackupError) -> Int32? {
    guard let found = try asOwner({ () throws(BackupError) in try find(directoryFD, name, path) }) else { return nil }
    let (fd, kind) = (found.fd, found.kind)
    var walked = false
    defer { if !walked { Sys.close(fd) } }
    let relativePath = BackupReportPath.join(path)
    let fileID = BackupLayout.fileID(domain: domain, relativePath: relativePath)
    var recorded = found.looked
    if kind == .file, !dryRun {
      // Read through the descriptor opened above (no new check of rights), written as
      // the user who backs up.
      guard let copied = try copy(fd, found.opened, fileID: fileID, path: path) else { return nil }
      recorded = copied
    }
    report.addIncluded(prefix + path, kind: kind, bytes: kind == .file ? Int64(recorded.st_size) : 0)
    progress?(report.included.files + report.directories, report.included.bytes)
    if let database {
      let record = BackupFileRecord(
        relativePath: relativePath, kind: kind, mode: UInt32(recorded.st_mode), userID: recorded.st_uid,
        groupID: recorded.st_gid, size: kind == .file ? Int64(recorded.st_size) : 0, inode: UInt64(recorded.st_ino),
        birth: Int64(min(recorded.st_mtim.tv_sec, recorded.st_ctim.tv_sec)),
        lastModified: Int64(recorded.st_mtim.tv_sec), lastStatusChange: Int64(recorded.st_ctim.tv_sec),
        protectionClass: Int64(found.protection.appleNumber), extendedAttributes: found.attributes,
        target: found.target)
      do throws(ManifestDatabase.Failure) {
        try database.insert(
          fileID: fileID, domain: domain, relativePath: relativePath, flags: kind.rawValue, file: record.archive())
        rowsWritten[domain, default: 0] += 1
      } catch {
        throw BackupError(.system, error.description)
      }
    }
    guard kind == .directory else { return nil }
    walked = true
    return fd
  }

  /// An item's attributes as programs on the mount see them (Apple's names mapped back;
  /// AppBox's own and the kernel's `security.`, `system.` and `trusted.` ones left out),
  /// and its Data Protection class.
  private func readAttributes(_ fd: Int32, _ path: [[UInt8]], isSymlink: Bool) throws(BackupError) -> (
    [(name: [UInt8], value: [UInt8])], ProtectionClass
  ) {
    let names: [[UInt8]]
    do throws(Errno) {
      names = try Xattr.names(fd)
    } catch  where error == .notSupported || error == .notPermitted || (isSymlink && error == .noEntry) {
      return ([], rootDefault)
    } catch {
      throw failure("cannot list the attributes of", path, error)
    }
    var attributes: [(name: [UInt8], value: [UInt8])] = []
    var own: ProtectionClass?
    var inherited: ProtectionClass?
    for name in names {
      let isForeign = name.starts(with: XattrNameMapping.foreignPrefix)
      let isProtection = name.elementsEqual(AppBoxAttribute.protection.name.utf8)
      let isInherited = name.elementsEqual(AppBoxAttribute.inheritedProtectionName.utf8)
      guard
        isForeign || isProtection || isInherited
          || (name.starts(with: "user.".utf8) && !XattrNameMapping.isReserved(name))
      else { continue }
      let value: [UInt8]
      do throws(Errno) {
        value = try Xattr.value(fd, (name + [0]).map { CChar(bitPattern: $0) })
      } catch  where error == .noData {
        continue  // removed meanwhile
      } catch {
        throw failure("cannot read an attribute of", path, error)
      }
      // A class that cannot be parsed counts as the strictest one, as on the mount: a
      // backup never makes a file more available than it was.
      if isProtection {
        own = ProtectionClass(parsing: value) ?? .complete
      } else if isInherited {
        inherited = ProtectionClass(parsing: value) ?? .complete
      } else {
        attributes.append((XattrNameMapping.mountName(forBackingName: name), value))
      }
    }
    return (attributes, own ?? inherited ?? rootDefault)
  }

  // MARK: - Copying

  /// Copies a regular file's bytes to its place in the backup, again when it changed
  /// meanwhile (size or times moved). `initial` is the file's status just after it was
  /// opened: the first copy's "before". Returns the status the copy matches, or nil when
  /// the file kept changing and its copy could not be verified (then it is left out and
  /// reported).
  private func copy(_ fd: Int32, _ initial: stat, fileID: String, path: [[UInt8]]) throws(BackupError) -> stat? {
    let key = InodeKey(device: UInt64(initial.st_dev), inode: UInt64(initial.st_ino))
    let bucket = try bucketFD(String(fileID.prefix(2)))
    if initial.st_nlink > 1, let first = linkCopies[key] {
      // Another name of a file already copied: the backup holds the same bytes again,
      // as a hard link inside the backup directory.
      let firstBucket = try bucketFD(String(first.fileID.prefix(2)))
      do throws(Errno) {
        let existing = try Sys.openat(firstBucket, first.fileID, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
        defer { Sys.close(existing) }
        try Sys.link(existing, bucket, Array(fileID.utf8CString))
        var st = try Sys.fstat(fd)
        st.st_size = off_t(first.size)
        return st
      } catch {
        throw failure("cannot link the copy of", path, error)
      }
    }
    let out: Int32
    do throws(Errno) {
      // The owner's only, whatever the file's mode: a backup is private.
      out = try Sys.openat(bucket, fileID, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
      try Sys.fchmod(out, 0o600)
    } catch {
      throw failure("cannot create the copy of", path, error)
    }
    defer { Sys.close(out) }
    do throws(Errno) {
      var lastCopy: (status: stat, bytes: Int64)?
      for attempt in 0..<Self.copyAttempts {
        let before = attempt == 0 ? initial : try Sys.fstat(fd)
        if attempt > 0 { try Sys.ftruncate(out, 0) }
        let copied = try SparseCopy.copy(
          from: fd, to: out, count: Int64(before.st_size), allocated: Int64(before.st_blocks) * 512
        ).covered
        let after = try Sys.fstat(fd)
        if copied == Int64(before.st_size) && Self.unchanged(before, after) {
          if attempt > 0 { report.recopied.append(BackupReportPath.join(prefix + path)) }
          if initial.st_nlink > 1 { linkCopies[key] = (fileID, copied) }
          return before
        }
        // Only growth can leave a copy that was the whole file once.
        lastCopy = copied == Int64(before.st_size) && after.st_size >= before.st_size ? (before, copied) : nil
      }
      // Still changing (a writer appending, say): keep the last copy if the file only
      // grew and the copy's bytes are still its first bytes, i.e. the file as it was
      // when that copy began.
      if let (before, copied) = lastCopy, try prefixMatches(fd, out, count: copied) {
        report.grown.append(BackupReportPath.join(prefix + path))
        var status = before
        status.st_size = off_t(copied)
        return status
      }
      try Sys.unlinkat(bucket, Array(fileID.utf8CString), 0)
      report.skipped.append(BackupReportPath.join(prefix + path))
      return nil
    } catch {
      throw failure("cannot copy", path, error)
    }
  }

  /// Whether nothing changed between two `fstat`s: size, and modification and change
  /// times to the nanosecond (Linux 6.13+ gives a file changed after its times were read
  /// a fine-grained time, so a change within the same clock tick still shows).
  private static func unchanged(_ a: stat, _ b: stat) -> Bool {
    a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec
      && a.st_ctim.tv_sec == b.st_ctim.tv_sec && a.st_ctim.tv_nsec == b.st_ctim.tv_nsec
  }

  /// Whether the first `count` bytes of `source` equal the copy's.
  private func prefixMatches(_ source: Int32, _ copy: Int32, count: Int64) throws(Errno) -> Bool {
    let a = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
    let b = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
    defer {
      a.deallocate()
      b.deallocate()
    }
    let reader = try Sys.reopen(copy, flags: O_RDONLY | O_CLOEXEC)
    defer { Sys.close(reader) }
    var offset: Int64 = 0
    while offset < count {
      let length = Int(min(count - offset, 1 << 20))
      let x = try Sys.pread(source, UnsafeMutableRawBufferPointer(rebasing: a[..<length]), off_t(offset))
      let y = try Sys.pread(reader, UnsafeMutableRawBufferPointer(rebasing: b[..<length]), off_t(offset))
      guard x == length, y == length, memcmp(a.baseAddress!, b.baseAddress!, length) == 0 else { return false }
      offset += Int64(length)
    }
    return true
  }

  private func bucketFD(_ name: String) throws(BackupError) -> Int32 {
    if let fd = buckets[name] { return fd }
    do throws(Errno) {
      let fd = try Directory.make(outFD, name, mode: 0o700)
      buckets[name] = fd
      return fd
    } catch {
      throw BackupError(.system, "cannot create \(name) in the backup: \(error)")
    }
  }

  private func failure(_ what: String, _ path: [[UInt8]], _ error: Errno) -> BackupError {
    let name = String(decoding: BackupReportPath.join(prefix + path), as: UTF8.self)
    return BackupError(.system, "\(what) \(name.isEmpty ? backing : name): \(error)")
  }

  // MARK: - Plists

  private func writePlists() throws(BackupError) {
    let plists = BackupPlists(apps: apps, source: backing, now: Clock.unix())
    for (file, plist, format) in [
      (BackupLayout.manifest, plists.manifest, PropertyList.Format.binary), ("Info.plist", plists.info, .xml),
      ("Status.plist", plists.status, .binary),
    ] {
      do throws(Errno) {
        let fd = try Sys.openat(outFD, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        defer { Sys.close(fd) }
        try Sys.fchmod(fd, 0o600)
        try Sys.writeAll(fd, plist.encoded(as: format))
      } catch {
        throw BackupError(.system, "cannot write \(file): \(error)")
      }
    }
  }
}

/// Paths of the report, as bytes.
enum BackupReportPath {
  /// Components joined with `/`.
  static func join(_ components: [[UInt8]]) -> [UInt8] { Array(components.joined(separator: [UInt8(ascii: "/")])) }
}
