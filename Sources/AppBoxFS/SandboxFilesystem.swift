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
  /// Backing inode numbers of the purgeable domains' top directories.
  let domainRoots: [StorageDomain: UInt64]
  /// The fixed directories by backing inode number (they are never removed or renamed).
  let fixedDirectories: [UInt64: SandboxLayout.FixedDirectory]
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
  /// Refuses passthrough reads of files whose class has closed.
  let revocation = PassthroughRevocation()
  /// Recently purged names and what purges cost the app.
  let purgeCost = PurgeCost()
  /// The last usage sample logged (lock order: a leaf lock, taken after the quota lock is
  /// released).
  let lastUsage = Mutex<UsageSample?>(nil)
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
  /// Whether a request to drop inodes is under way.
  let releasing = Atomic<Bool>(false)
  /// Background work that must not run on a request thread: kernel notifications, timed
  /// lock transitions, background purges.
  let maintenance = DispatchQueue(label: "appbox.maintenance")

  /// Opens the backing directory, creates the fixed layout in it, and indexes it (usage
  /// per domain, the purge catalog).
  /// - Parameters:
  ///   - configuration: how long the kernel may cache replies.
  ///   - driver: what serves the filesystem (`FuseDriver` on a mount).
  ///   - indexProgress: told how far the index has got, every few thousand entries and
  ///     once at the end (a million files take seconds).
  /// - Throws: ``Errno`` when the backing directory cannot be opened or the layout cannot
  ///   be created (e.g. a fixed name exists but is not a directory).
  public init(
    backingDirectory: String, configuration: CacheTimeouts, options: SandboxOptions, driver: any FilesystemDriver,
    indexProgress: (@Sendable (IndexProgress) -> Void)? = nil
  ) throws(Errno) {
    let rootFD = try Sys.openat(AT_FDCWD, backingDirectory, Linux.openPath | O_DIRECTORY | O_CLOEXEC)
    let rootStat: stat
    do throws(Errno) { rootStat = try Sys.fstat(rootFD) } catch {
      Sys.close(rootFD)
      throw error
    }
    handleMountFD = Self.handleMountDescriptor(rootFD)
    inodes = InodeTable(
      root: Inode(node: .root, fd: rootFD, attributes: rootStat, fixed: nil, domain: .root, lookups: 1),
      retainedLimit: handleMountFD >= 0 ? options.retainedHandles : 0)
    self.configuration = configuration
    self.driver = driver
    passthrough = driver.passthrough
    self.options = options
    backingPath = Array(backingDirectory.utf8)
    (domainRoots, fixedDirectories) = try Self.createLayout(in: rootFD)
    try DefaultProtection.adopt(options.defaultProtection, rootFD: rootFD)
    let (ledger, catalog) = try BackingScan.run(rootFD: rootFD, capacity: options.capacity, progress: indexProgress)
    catalog.policy = options.purgePolicy
    storage = StorageState(ledger: ledger, catalog: catalog, waterMarks: options.waterMarks)
    protection = ProtectionState(options: options)
    events = EventLog(path: options.eventsPath, id: options.eventLogID, limits: options.eventLogLimits)
  }

  /// Creates every fixed directory that is missing; refuses a fixed name that is not a
  /// directory (or is a symlink), changing nothing.
  /// - Returns: the backing inode numbers of the purgeable domains' top directories, and
  ///   every fixed directory by its backing inode number.
  static func createLayout(in rootFD: Int32) throws(Errno) -> (
    [StorageDomain: UInt64], [UInt64: SandboxLayout.FixedDirectory]
  ) {
    var roots: [StorageDomain: UInt64] = [:]
    var fixed: [UInt64: SandboxLayout.FixedDirectory] = [:]
    for directory in SandboxLayout.creationOrder {
      var dirFD = try Sys.dup(rootFD)
      defer { Sys.close(dirFD) }
      for component in directory.components {
        let name = component + [0]
        let next = try name.withUnsafeBufferPointer { (p) throws(Errno) -> Int32 in
          let cname = UnsafeRawPointer(p.baseAddress!).assumingMemoryBound(to: CChar.self)
          do throws(Errno) {
            return try Sys.openat(dirFD, cname, Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
          } catch  where error == .noEntry {
            try Sys.mkdirat(dirFD, cname, 0o755)
            return try Sys.openat(dirFD, cname, Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
          }
        }
        Sys.close(dirFD)
        dirFD = next
      }
      let inode = UInt64(try Sys.fstat(dirFD).st_ino)
      fixed[inode] = directory
      if directory.domain.isPurgeable { roots[directory.domain] = inode }
    }
    return (roots, fixed)
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
      // Fixed directories keep their descriptors whatever the kernel holds.
      dropIdleEntries(atMost: max(1, inodes.count / 4)) { $0.fixed == nil }
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
  private func dropIdleEntries(atMost limit: Int, where eligible: @escaping (Inode) -> Bool) {
    guard let notifier = notifier.withLock({ $0 }) else { return }
    let idle = inodes.snapshot().lazy.filter { $0.openHandles.load(ordering: .relaxed) == 0 && eligible($0) }
    for inode in idle.prefix(limit) {
      let (parent, name) = inode.origin.withLock { $0 }
      if !name.isEmpty { notifier.invalidateEntry(parent: parent, name: name) }
    }
  }

  // MARK: - Helpers shared by the handlers

  /// How the layout treats names in `directory`.
  func layoutParent(_ directory: Inode) -> SandboxLayout.Parent {
    if directory === inodes.root { return .root }
    return directory.fixed == .library ? .library : .other
  }

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
      entryTimeout: inodes.count > descriptorBudget ? 0 : configuration.entryTimeout,
      attributeTimeout: configuration.attributeTimeout(for: attributes),
      generation: inode === inodes.root ? 0 : generation)
  }

  /// Looks `name` up in `parent` and takes one lookup on the result.
  func lookupEntry(in parent: Inode, name: FileName) throws(Errno) -> Entry {
    let fd = try openInode(in: parent, name: name)
    let attributes: stat
    do throws(Errno) { attributes = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw error
    }
    let fixed =
      attributes.st_mode & S_IFMT == S_IFDIR
      ? SandboxLayout.fixedDirectory(named: name, in: layoutParent(parent)) : nil
    let inode = inodes.remember(
      fd: fd, attributes: attributes, fixed: fixed, domain: fixed?.domain ?? parent.domain, parent: inodes.node(parent),
      name: name)!  // no expected node id: always an inode
    if inodes.count > descriptorBudget { releaseDescriptors() }
    return entry(inode, attributes)
  }

  /// The `O_PATH` descriptor of `name` in `parent` (``withDescriptors(_:)``).
  func openInode(in parent: Inode, name: FileName) throws(Errno) -> Int32 {
    try withDescriptors { () throws(Errno) -> Int32 in
      try Sys.openat(parent.fd, name.cString, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
    }
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

  /// Refuses a new name directly in the container root.
  func checkCanCreate(in parent: Inode) throws(Errno) {
    guard SandboxLayout.allowsNewEntries(in: layoutParent(parent)) else { throw .notPermitted }
  }

  /// Refuses removing, renaming or replacing a fixed directory.
  func checkCanRemove(_ name: FileName, in parent: Inode) throws(Errno) {
    guard SandboxLayout.allowsRemoval(of: name, in: layoutParent(parent)) else { throw .notPermitted }
  }
}
