import AppBoxEvents
import Dispatch
import FilesystemInterface
import Posix
import SandboxPolicy
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The AppBox filesystem: an inode-based passthrough over the backing directory (after
/// libfuse's `passthrough_hp.cc`) that asks the policy core before every decision.
///
/// Handlers live in extensions by op family: `+Nodes` (lookup, attributes),
/// `+Namespace` (create, remove, rename, link), `+Files` (open and I/O),
/// `+Directories` (listing), `+Xattrs`.
public final class SandboxFilesystem: Filesystem {
  /// Kernel-facing node table.
  let inodes: InodeTable
  /// Cache timeouts, as configured for the session.
  let configuration: CacheTimeouts
  /// The policies' settings.
  let options: SandboxOptions
  /// The simulated device's lock state.
  let protection: ProtectionState
  /// Quota, purge catalog and their counters.
  let storage: StorageState
  /// Where refusals, state changes and purges are recorded.
  let events: EventLog
  /// The backing directory's absolute path (to name paths in events).
  let backingPath: [UInt8]
  /// Backing inode numbers of each container's purgeable domains' top directories.
  /// Lock order: a leaf.
  let domainRoots: Mutex<[StorageArea: UInt64]>
  /// Where each directory of the layout (and each container's metadata file) stands, by
  /// backing inode number (they are never removed or renamed by programs): what a node
  /// found again by file handle, or as "..", is. Lock order: a leaf.
  let layoutInodes: Mutex<[UInt64: Inode.Place]>
  /// A device mount's containers; nil on a plain mount.
  let device: DeviceContainers?
  /// Which containers each process may reach (a device's app confinement).
  let confinement: AppConfinement
  /// A readable descriptor of the backing root, for opening backing files by handle
  /// (the kernel does not take an `O_PATH` one there); -1 where that is not allowed.
  let handleMountFD: Int32
  /// Every entry's generation but the root's (0): new at each mount, so that a file
  /// handle from an earlier mount is stale even where its node id is given out again.
  let generation = UInt64(UInt32.random(in: 1...UInt32.max))
  /// Set once the mount is up.
  let notifier = Mutex<(any KernelNotifier)?>(nil)
  /// Held while a lock-state change takes effect (``changeState(_:)``): one at a time.
  /// Never taken on a request thread; may be held across kernel notifications.
  let stateChanges = Mutex(())
  /// The driver's services: hand-offs, busy-poll counters.
  let driver: any FilesystemDriver
  /// Registers backing files for passthrough opens (available once the kernel agreed).
  let passthrough: any PassthroughFiles
  /// Files open in passthrough mode now.
  let passthroughFiles = Atomic<Int>(0)
  /// Files a program may write through a mapping of the backing file (``WriteMappedFiles``).
  let writeMapped = WriteMappedFiles()
  /// Writable handles through the kernel's writeback cache open now.
  let writebackWriters = Atomic<Int>(0)
  /// Refuses passthrough reads of files whose class has closed.
  let revocation = PassthroughRevocation()
  /// Recently purged names and what purges cost the app.
  let purgeCost = PurgeCost()
  /// Errors no request returns, decided on and counted by site.
  let internalErrors = InternalErrors()
  /// Files whose stored class could not be used, reported once each.
  let unreadableClasses = UnreadableClasses()
  /// The last usage sample logged (lock order: a leaf lock, taken after the quota lock is
  /// released).
  let lastUsage = Mutex(LastUsage())
  /// The names of Caches and tmp files with more than one link, to put them back on the
  /// purge catalog when they are down to one.
  let linkNames = LinkNames()
  /// How many inodes the kernel may hold before AppBox asks it to drop some: each holds
  /// an `O_PATH` descriptor, and the process may open only so many.
  let descriptorBudget = max(64, Int(ResourceLimits.openFiles) * 3 / 4 - 64)
  /// Held through a rename that moves a directory to another domain, so that such moves
  /// never overlap (the kernel serializes cross-directory renames too). Lock order: taken
  /// before any other lock of the daemon.
  let domainMoves = Mutex(())
  /// Removals of containers so far: names their staging directories apart.
  let removals = Atomic<UInt64>(0)
  /// The mount's owner: the daemon's user.
  let ownerUID = getuid()
  /// Handles open now (files and directories), each holding a descriptor.
  let openHandles = Atomic<Int>(0)
  /// The descriptors (inodes and open handles) a request of anyone but root and the
  /// mount's owner may leave the daemon holding (``admitNewHandle(for:)``): read once,
  /// as ``descriptorBudget`` is.
  let othersDescriptorLimit = DescriptorShare.limit(
    budget: Int(ResourceLimits.openFiles) - 64, isOwnerOrRoot: false)
  /// Purges' unlinks of files no node held, so far: a lookup that made a node meanwhile
  /// looks again whether its file still has a name (``lookupEntry(in:name:)``).
  let purgeUnlinks = Atomic<UInt64>(0)
  /// Whether a request to drop inodes is under way.
  let releasing = Atomic<Bool>(false)
  /// Whether the backing filesystem keeps a directory's allocation when a name leaves it
  /// (ext2/3/4 never shrink a directory; tmpfs allocates none): then a removal's directory
  /// is not measured, its charge staying what its last measurement found
  /// (``accountRemoval(from:)``).
  let removalsKeepDirectorySize: Bool
  /// Background work that must not run on a request thread: kernel notifications, timed
  /// lock transitions, background purges.
  let maintenance = DispatchQueue(label: "appbox.maintenance")

  /// Opens the backing directory, creates the fixed layout in it (a device's: its own
  /// directories and every container's, ``DeviceBacking``), and indexes it (usage per
  /// domain and container, the purge catalog).
  /// - Parameters:
  ///   - configuration: how long the kernel may cache replies.
  ///   - driver: what serves the filesystem (`FuseDriver` on a mount).
  ///   - indexProgress: told how far the index has got, every few thousand entries and
  ///     once at the end (a million files take seconds).
  ///   - runs: on a device, which app each process runs as (the daemon's runs of `appbox
  ///     run --app`): a program of a run may reach only its app's containers
  ///     (docs/architecture.md#app-confinement). Nil: no process is confined.
  /// - Throws: ``SandboxSetupError``: ``SandboxSetupError/system(_:)`` when the backing
  ///   directory cannot be opened or the layout cannot be created (e.g. a fixed name exists
  ///   but is not a directory), EINVAL when it holds another kind of sandbox or a device's
  ///   containers are not consistent (``DeviceBacking/check(_:device:)`` says why); the
  ///   default class recorded on the backing root when it names no class or cannot be read
  ///   (nothing is changed then).
  public init(
    backingDirectory: String, configuration: CacheTimeouts, options: SandboxOptions, driver: any FilesystemDriver,
    indexProgress: (@Sendable (IndexProgress) -> Void)? = nil, runs: (any RunMembership)? = nil
  ) throws(SandboxSetupError) {
    let rootFD: Int32
    let rootStat: stat
    do throws(Errno) {
      rootFD = try Sys.openat(AT_FDCWD, backingDirectory, Linux.openPath | O_DIRECTORY | O_CLOEXEC)
    } catch {
      throw .system(error)
    }
    do throws(Errno) { rootStat = try Sys.fstat(rootFD) } catch {
      Sys.close(rootFD)
      throw .system(error)
    }
    let apps: DeviceApps?
    do throws(DeviceBacking.Problem) {
      if options.device {
        apps = try DeviceBacking.prepare(rootFD: rootFD)
      } else {
        try DeviceBacking.checkKind(rootFD: rootFD, device: false)
        apps = nil
      }
    } catch {
      Sys.close(rootFD)
      throw .system(error.errno ?? .invalidArgument)
    }
    do throws(Errno) {
      let type = try Sys.filesystemType(rootFD)
      removalsKeepDirectorySize = type == Linux.ext4SuperMagic || type == Linux.tmpfsMagic
    } catch {
      removalsKeepDirectorySize = false  // not known: every removal's directory is measured
    }
    let device = apps.map { DeviceContainers(apps: $0) }
    self.device = device
    handleMountFD = Self.handleMountDescriptor(rootFD)
    let rootPlace = Inode.Place(layout: device == nil ? .root : .device(.root), domain: .root)
    inodes = InodeTable(
      root: Inode(node: .root, fd: rootFD, attributes: rootStat, place: rootPlace, lookups: 1),
      retainedLimit: handleMountFD >= 0 ? options.retainedHandles : 0)
    self.configuration = configuration
    self.driver = driver
    passthrough = driver.passthrough
    self.options = options
    backingPath = Array(backingDirectory.utf8)
    try DefaultProtection.check(rootFD: rootFD)  // before anything is created or stamped
    let ledger: QuotaLedger
    let catalog: PurgeCatalog
    do throws(Errno) {
      let (roots, layout) = try Self.createLayout(in: rootFD, device: device)
      domainRoots = Mutex(roots)
      layoutInodes = Mutex(layout)
      try DefaultProtection.adopt(options.defaultProtection, rootFD: rootFD, layout: rootPlace.layout)
      (ledger, catalog) = try BackingScan.run(
        rootFD: rootFD, layout: rootPlace.layout, device: device, capacity: options.capacity, progress: indexProgress)
    } catch {
      throw .system(error)
    }
    catalog.policy = options.purgePolicy
    for (number, container) in device?.all ?? [:] { catalog.containerPaths[number] = container.components }
    storage = StorageState(ledger: ledger, catalog: catalog, waterMarks: options.waterMarks)
    protection = ProtectionState(options: options)
    events = EventLog(path: options.eventsPath, id: options.eventLogID, limits: options.eventLogLimits)
    confinement = AppConfinement(membership: device == nil ? nil : runs)
  }

  /// Creates every fixed directory that is missing; refuses a fixed name that is not a
  /// directory (or is a symlink), changing nothing. On a device (whose containers
  /// ``DeviceBacking`` has made ready), every container's layout.
  /// - Returns: the backing inode numbers of the purgeable domains' top directories, and
  ///   where every directory of the layout (and metadata file) stands, by backing inode.
  static func createLayout(in rootFD: Int32, device: DeviceContainers?) throws(Errno) -> (
    [StorageArea: UInt64], [UInt64: Inode.Place]
  ) {
    var roots: [StorageArea: UInt64] = [:]
    var layout: [UInt64: Inode.Place] = [:]
    guard let device else {
      try containerLayout(.app, at: rootFD, number: .top, roots: &roots, layout: &layout)
      return (roots, layout)
    }
    for directory in DeviceLayout.creationOrder {
      let fd = try DeviceBacking.makeDirectories(directory.components, in: rootFD)
      defer { Sys.close(fd) }
      layout[UInt64(try Sys.fstat(fd).st_ino)] = Inode.Place(layout: .device(directory), domain: .root)
    }
    for (number, container) in device.all {
      let fd = try DeviceBacking.makeDirectories(container.components, in: rootFD)
      defer { Sys.close(fd) }
      try containerLayout(container.kind, at: fd, number: number, roots: &roots, layout: &layout)
    }
    return (roots, layout)
  }

  /// Records (making what is missing) the layout of one container whose root is `fd`.
  static func containerLayout(
    _ kind: ContainerKind, at fd: Int32, number: ContainerNumber, roots: inout [StorageArea: UInt64],
    layout: inout [UInt64: Inode.Place]
  ) throws(Errno) {
    if number != .top {
      layout[UInt64(try Sys.fstat(fd).st_ino)] = Inode.Place(layout: kind.rootPlace, domain: .root, container: number)
      let metadata = try FileName.withBytes(DeviceLayout.metadataFileName) { (name) throws(Errno) -> stat in
        try Sys.fstatat(fd, name.cString, AT_SYMLINK_NOFOLLOW)
      }
      layout[UInt64(metadata.st_ino)] = Inode.Place(domain: .root, container: number, isContainerMetadata: true)
    }
    for directory in kind.fixedDirectories {
      let dirFD = try DeviceBacking.makeDirectories(directory.components, in: fd)
      defer { Sys.close(dirFD) }
      let inode = UInt64(try Sys.fstat(dirFD).st_ino)
      layout[inode] = Inode.Place(
        fixed: directory, layout: directory.place(in: kind), domain: directory.domain, container: number)
      if directory.domain.isPurgeable { roots[StorageArea(number, directory.domain)] = inode }
    }
  }

  public func mounted(notifier: any KernelNotifier) {
    self.notifier.withLock { $0 = notifier }
    startMaintenance()
    recordUsage(.mount)
    scheduleUsageSamples()
  }

  /// Asks the kernel to drop a quarter of the inodes it holds that no program has open
  /// (from the maintenance queue: never from a request thread). Their forgets close the
  /// descriptors. Without this, a tree larger than the descriptor limit would make
  /// lookups fail with EMFILE.
  func releaseDescriptors() {
    guard releasing.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
    maintenance.async { [self] in
      defer { releasing.store(false, ordering: .relaxed) }
      // The layout's directories keep their descriptors whatever the kernel holds.
      dropIdleEntries(atMost: max(1, inodes.count / 4)) { $0.fixed == nil && $0.layout == .other }
    }
  }

  /// Asks the kernel to drop its cached names, attributes and inodes of this mount that no
  /// program has open (`appbox drop-caches`: what `drop_caches` does, for one mount and
  /// without root); their forgets come as requests. Never from a request thread.
  /// - Parameter inUse: backing inode numbers of directories that are some process's
  ///   working or root directory: kept, since a dropped one would make its `getcwd` fail.
  public func dropKernelCaches(sparing inUse: Set<UInt64>) {
    dropIdleEntries(atMost: .max) { !($0.fileType == S_IFDIR && inUse.contains($0.key.inode)) }
  }

  /// Invalidates the kernel's entries of up to `limit` inodes that have no open handle and
  /// pass `eligible` (a directory's subtree goes with it).
  ///
  /// Holds no inode while it notifies: an invalidation waits for its directory's lock,
  /// which a request in that directory holds while it waits for a descriptor
  /// (``withDescriptors(_:)``: a lookup in an `unlink`, say). Inodes held here meanwhile
  /// would keep their descriptors open after their forgets, so the forgets that request
  /// waits for would free none.
  private func dropIdleEntries(atMost limit: Int, where eligible: @escaping (Inode) -> Bool) {
    guard let notifier = notifier.withLock({ $0 }) else { return }
    for (parent, name) in idleEntries(atMost: limit, where: eligible) {
      notifier.invalidateEntry(parent: parent, name: name)
    }
  }

  /// The parent and name of up to `limit` inodes that have no open handle and pass
  /// `eligible`: values, so that no inode outlives this call here.
  private func idleEntries(atMost limit: Int, where eligible: @escaping (Inode) -> Bool) -> [(NodeID, [UInt8])] {
    let idle = inodes.snapshot().lazy.filter { $0.openHandles.load(ordering: .relaxed) == 0 && eligible($0) }
    return idle.prefix(limit).map { inode in inode.origin.withLock { ($0.parent, $0.name) } }.filter { !$0.1.isEmpty }
  }

  // MARK: - Helpers shared by the handlers

  /// The reply for `inode` with fresh attributes.
  ///
  /// Past the descriptor budget the entry is not cached (timeout 0): the kernel deletes
  /// such a name once no program uses it and forgets its inode, closing the descriptor,
  /// without waiting for ``releaseDescriptors()``'s invalidations, which a lookup waiting
  /// for a descriptor in the same directory would hold up (an invalidation takes the
  /// directory's lock, which the lookup holds).
  func entry(_ inode: Inode, _ attributes: stat) -> Entry {
    Entry(
      node: inodes.node(inode), attributes: attributes,
      entryTimeout: inodes.count > descriptorBudget || (device != nil && inode.isContainerRoot)
        ? 0 : configuration.entryTimeout,
      attributeTimeout: inode.writesGated.load(ordering: .acquiring)
        ? 0 : configuration.attributeTimeout(for: attributes),
      generation: inode === inodes.root ? 0 : generation)
  }

  /// Looks `name` up in `parent` and takes one lookup on the result. On a device, AppBox's
  /// staging names and anything in a directory of containers that is not one are not
  /// there (ENOENT).
  func lookupEntry(in parent: Inode, name: FileName) throws(Errno) -> Entry {
    if hides(name, in: parent) { throw .noEntry }
    let unlinksBefore = purgeUnlinks.load(ordering: .sequentiallyConsistent)
    let fd = try openInode(in: parent, name: name)
    let attributes: stat
    let place: Inode.Place
    do throws(Errno) {
      attributes = try Sys.fstat(fd)
      place = try self.place(of: name, in: parent, isDirectory: attributes.st_mode & S_IFMT == S_IFDIR)
    } catch {
      Sys.close(fd)
      throw error
    }
    // No expected node id: always an inode.
    let (inode, isNew) = inodes.remember(
      fd: fd, attributes: attributes, place: place, parent: inodes.node(parent), name: name)!
    if isNew, purgeUnlinks.load(ordering: .sequentiallyConsistent) != unlinksBefore {
      try checkNotPurged(inode)
    }
    if inodes.count > descriptorBudget { releaseDescriptors() }
    return entry(inode, attributes)
  }

  /// A node this lookup made from a status read before a purge unlinked the file (which
  /// found no node to mark, and gave back what the books held): the name is gone (ENOENT),
  /// and the node, marked purged with nothing charged, is dropped. Either the purge finds
  /// the node after its unlink (``SandboxFilesystem/unlinkVictim(_:booked:in:)``) or this
  /// finds the unlink, whichever comes second; both mark it the same way.
  private func checkNotPurged(_ inode: Inode) throws(Errno) {
    let links: nlink_t
    do throws(Errno) { links = try Sys.fstat(inode.fd).st_nlink } catch {
      forget(inode.node, count: 1)
      throw error
    }
    guard links == 0 else { return }
    markPurged(inode)
    forget(inode.node, count: 1)
    throw .noEntry
  }

  /// Marks a node whose file a purge unlinked: off the books (its charge went with the
  /// name), ESTALE to the kernel, which then looks its name up again.
  func markPurged(_ inode: Inode) {
    inode.allocated.withLock { charged in
      charged = 0
      inode.purged.store(true, ordering: .relaxed)
    }
  }

  /// The `O_PATH` descriptor of `name` in `parent` (``withDescriptors(_:)``).
  func openInode(in parent: Inode, name: FileName) throws(Errno) -> Int32 {
    try withDescriptors { () throws(Errno) -> Int32 in
      try Sys.openat(parent.fd, name.cString, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
    }
  }

  /// Whether `ctx` is root or the mount's owner (the daemon's user), for whom
  /// ``DescriptorShare`` keeps the last descriptors.
  func isOwnerOrRoot(_ ctx: Caller) -> Bool { ctx.uid == 0 || ctx.uid == ownerUID }

  /// The most inodes a request of `ctx` may leave the daemon holding
  /// (``DescriptorShare``): the whole budget for root and the mount's owner, seven eighths
  /// of it for anyone else.
  func inodeLimit(for ctx: Caller) -> Int {
    DescriptorShare.limit(budget: descriptorBudget, isOwnerOrRoot: isOwnerOrRoot(ctx))
  }

  /// Before a request of `ctx` that may make an inode (a lookup, a create): past its share
  /// (``inodeLimit(for:)``), it waits for forgets as a request out of descriptors does
  /// (``withDescriptors(_:)``), and is `EMFILE` if none come.
  func admitNewInode(for ctx: Caller) throws(Errno) {
    let limit = inodeLimit(for: ctx)
    guard inodes.count >= limit else { return }
    try withDescriptors { () throws(Errno) in
      if inodes.count >= limit { throw Errno.tooManyOpenFiles }
    }
  }

  /// Before a request of `ctx` that opens a handle (open, create, opendir), each a
  /// descriptor of the daemon's beside its inode's: anyone but root and the mount's owner
  /// may not leave the daemon holding more than seven eighths of its descriptors
  /// (``DescriptorShare``), inodes and handles together; past that, `EMFILE` at once
  /// (handles are let go by their programs, not by a request to the kernel, so waiting
  /// would only hold a worker).
  func admitNewHandle(for ctx: Caller) throws(Errno) {
    guard !isOwnerOrRoot(ctx), inodes.count + openHandles.load(ordering: .relaxed) >= othersDescriptorLimit
    else { return }
    releaseDescriptors()  // idle inodes go, for the next try
    throw .tooManyOpenFiles
  }

  /// Runs `open`, which opens a descriptor. Out of descriptors (EMFILE), it asks the
  /// kernel to drop idle inodes and tries again while their forgets come (as requests,
  /// which a busy machine may serve late): it answers EMFILE once five seconds pass
  /// without the daemon holding fewer inodes, or after a minute in all.
  func withDescriptors<T>(_ open: () throws(Errno) -> T) throws(Errno) -> T {
    var deadline: Double?
    var lastEnd = 0.0
    var fewest = Int.max
    while true {
      do throws(Errno) {
        return try open()
      } catch  where error == .tooManyOpenFiles {
        let now = Clock.monotonic()
        let held = inodes.count
        if deadline == nil {
          lastEnd = now + 60
          driver.handOff()  // the forgets come as requests
        }
        if held < fewest {  // progress: forgets are closing descriptors
          fewest = held
          deadline = min(now + 5, lastEnd)
        } else if now > deadline! {
          throw error
        }
        releaseDescriptors()
        Clock.sleep(seconds: 0.005)
      }
    }
  }

  /// Refuses a new name directly in an app container's root or a device's own
  /// directories.
  func checkCanCreate(in parent: Inode) throws(Errno) {
    guard SandboxLayout.allowsNewEntries(in: parent.layout) else { throw .notPermitted }
  }

  /// Refuses removing, renaming or replacing a fixed directory, a container's metadata
  /// file, or anything in a device's own directories (containers go by `appbox app remove`).
  func checkCanRemove(_ name: FileName, in parent: Inode) throws(Errno) {
    guard SandboxLayout.allowsRemoval(of: name, in: parent.layout) else { throw .notPermitted }
  }

  /// Refuses changing a container's metadata file (its data, attributes or links): the
  /// device's record of its apps.
  @inline(__always)
  func checkChangeable(_ inode: Inode) throws(Errno) {
    if inode.isContainerMetadata { throw .notPermitted }
  }

  /// Refuses an item moving or linking from one container to another (EXDEV: each
  /// container is a volume of its own as far as programs go).
  @inline(__always)
  func checkSameContainer(_ a: Inode, _ b: Inode) throws(Errno) {
    if a.container != b.container { throw .crossDevice }
  }

  // MARK: Where names stand in the layout

  /// Whether `name` in `directory` is hidden: AppBox's staging names in a device's
  /// directories of containers.
  @inline(__always)
  func hides(_ name: some Collection<UInt8>, in directory: Inode) -> Bool {
    guard case .device(let place) = directory.layout, place.containerKind != nil else { return false }
    return DeviceLayout.isStaging(name)
  }

  /// Whether `directory` is one of a device's directories of containers
  /// (`Containers/Data/Application/`, `Containers/Shared/AppGroup/`).
  @inline(__always)
  func isDirectoryOfContainers(_ directory: Inode) -> Bool {
    guard case .device(let place) = directory.layout else { return false }
    return place.containerKind != nil
  }

  /// Where the entry `name` of `parent` stands in the layout.
  /// - Throws: ENOENT for an entry of a directory of containers that is not a container
  ///   the device knows (hidden).
  func place(of name: some Collection<UInt8>, in parent: Inode, isDirectory: Bool) throws(Errno) -> Inode.Place {
    try Self.place(
      of: name, in: Inode.Place(layout: parent.layout, domain: parent.domain, container: parent.container),
      isDirectory: isDirectory, device: device)
  }

  /// Where the entry `name` of a directory that stands at `parent` stands in the layout
  /// (``place(of:in:isDirectory:)``; the mount-time index asks too).
  static func place(
    of name: some Collection<UInt8>, in parent: Inode.Place, isDirectory: Bool, device: DeviceContainers?
  ) throws(Errno) -> Inode.Place {
    switch parent.layout {
    case .other:
      return Inode.Place(domain: parent.domain, container: parent.container)
    case .device(let directory):
      if let kind = directory.containerKind {
        guard isDirectory, let number = device?.number(of: kind, named: name) else { throw .noEntry }
        return Inode.Place(layout: kind.rootPlace, domain: .root, container: number)
      }
      if isDirectory, let child = directory.child(named: name) {
        return Inode.Place(layout: .device(child), domain: .root)
      }
      return Inode.Place(domain: .root)  // something put beside the device's directories
    case .root, .library, .groupRoot, .groupLibrary:
      let kind: ContainerKind = parent.layout == .root || parent.layout == .library ? .app : .group
      if isDirectory, let fixed = SandboxLayout.fixedDirectory(named: name, in: parent.layout) {
        return Inode.Place(
          fixed: fixed, layout: fixed.place(in: kind), domain: fixed.domain, container: parent.container)
      }
      let metadata =
        device != nil && !isDirectory && (parent.layout == .root || parent.layout == .groupRoot)
        && name.elementsEqual(DeviceLayout.metadataFileName)
      return Inode.Place(domain: parent.domain, container: parent.container, isContainerMetadata: metadata)
    }
  }

  /// The bundle or group id of a device's container (nil on a plain mount, for the
  /// device's own directories, and for a container removed meanwhile).
  func containerName(_ number: ContainerNumber) -> String? {
    guard number != .top else { return nil }
    return device?.container(number)?.id.name
  }
}
