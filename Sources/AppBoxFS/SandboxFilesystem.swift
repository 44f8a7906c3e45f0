import Dispatch
import FuseBridge
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
public final class SandboxFilesystem: FuseFilesystem {
  /// Kernel-facing node table.
  let inodes: InodeTable
  /// Cache timeouts, as configured for the session.
  let configuration: FuseConfiguration
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
  /// Set once the mount is up.
  let notifier = Mutex<KernelNotifier?>(nil)
  /// Registers backing files for passthrough opens (available once the kernel agreed).
  let passthrough = PassthroughFiles()
  /// Files open in passthrough mode now.
  let passthroughFiles = Atomic<Int>(0)
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
  /// Whether a request to drop inodes is under way.
  let releasing = Atomic<Bool>(false)
  /// Background work that must not run on a request thread: kernel notifications, timed
  /// lock transitions, background purges.
  let maintenance = DispatchQueue(label: "appbox.maintenance")

  /// Opens the backing directory, creates the fixed layout in it, and indexes it (usage
  /// per domain, the purge catalog).
  /// - Throws: ``Errno`` when the backing directory cannot be opened or the layout cannot
  ///   be created (e.g. a fixed name exists but is not a directory).
  public init(backingDirectory: String, configuration: FuseConfiguration, options: SandboxOptions) throws(Errno) {
    let rootFD = try Sys.openat(AT_FDCWD, backingDirectory, Linux.openPath | O_DIRECTORY | O_CLOEXEC)
    let rootStat: stat
    do throws(Errno) { rootStat = try Sys.fstat(rootFD) } catch {
      Sys.close(rootFD)
      throw error
    }
    inodes = InodeTable(
      root: Inode(node: .root, fd: rootFD, attributes: rootStat, fixed: nil, domain: .root, lookups: 1))
    self.configuration = configuration
    self.options = options
    backingPath = Array(backingDirectory.utf8)
    domainRoots = try Self.createLayout(in: rootFD)
    try DefaultProtection.adopt(options.defaultProtection, rootFD: rootFD)
    let (ledger, catalog) = try BackingScan.run(rootFD: rootFD, capacity: options.capacity)
    catalog.policy = options.purgePolicy
    storage = StorageState(ledger: ledger, catalog: catalog, waterMarks: options.waterMarks)
    protection = ProtectionState(options: options)
    events = EventLog(path: options.eventsPath)
  }

  /// Creates every fixed directory that is missing; refuses a fixed name that is not a
  /// directory (or is a symlink), changing nothing.
  /// - Returns: the backing inode numbers of the purgeable domains' top directories.
  static func createLayout(in rootFD: Int32) throws(Errno) -> [StorageDomain: UInt64] {
    var roots: [StorageDomain: UInt64] = [:]
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
      if directory.domain.isPurgeable {
        roots[directory.domain] = UInt64(try Sys.fstat(dirFD).st_ino)
      }
    }
    return roots
  }

  public func mounted(notifier: KernelNotifier) {
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
      guard let notifier = notifier.withLock({ $0 }) else { return }
      let idle = inodes.snapshot().lazy.filter { $0.fixed == nil && $0.openHandles.load(ordering: .relaxed) == 0 }
      for inode in idle.prefix(max(1, inodes.count / 4)) where !inode.origin.name.isEmpty {
        notifier.invalidateEntry(parent: inode.origin.parent, name: inode.origin.name)
      }
    }
  }

  // MARK: - Helpers shared by the handlers

  /// How the layout treats names in `directory`.
  func layoutParent(_ directory: Inode) -> SandboxLayout.Parent {
    if directory === inodes.root { return .root }
    return directory.fixed == .library ? .library : .other
  }

  /// The reply for `inode` with fresh attributes.
  func entry(_ inode: Inode, _ attributes: stat) -> Entry {
    Entry(
      node: inodes.node(inode), attributes: attributes, entryTimeout: configuration.entryTimeout,
      attributeTimeout: configuration.attributeTimeout(for: attributes))
  }

  /// Looks `name` up in `parent` and takes one lookup on the result.
  func lookupEntry(in parent: Inode, name: UnsafePointer<CChar>) throws(Errno) -> Entry {
    let fd = try openInode(in: parent, name: name)
    let attributes: stat
    do throws(Errno) { attributes = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw error
    }
    let fixed =
      attributes.st_mode & S_IFMT == S_IFDIR
      ? SandboxLayout.fixedDirectory(named: CName(name), in: layoutParent(parent)) : nil
    let inode = inodes.remember(
      fd: fd, attributes: attributes, fixed: fixed, domain: fixed?.domain ?? parent.domain, parent: inodes.node(parent),
      name: CName(name))
    if inodes.count > descriptorBudget { releaseDescriptors() }
    return entry(inode, attributes)
  }

  /// The `O_PATH` descriptor of `name` in `parent` (``withDescriptors(_:)``).
  func openInode(in parent: Inode, name: UnsafePointer<CChar>) throws(Errno) -> Int32 {
    try withDescriptors { () throws(Errno) -> Int32 in
      try Sys.openat(parent.fd, name, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
    }
  }

  /// Runs `open`, which opens a descriptor. Out of descriptors (EMFILE), it asks the
  /// kernel to drop idle inodes and tries again for up to five seconds (their forgets come
  /// as requests, which a busy machine may serve late), then answers EMFILE.
  func withDescriptors<T>(_ open: () throws(Errno) -> T) throws(Errno) -> T {
    var deadline: Double?
    while true {
      do throws(Errno) {
        return try open()
      } catch  where error == .tooManyOpenFiles {
        let now = Clock.monotonic()
        if deadline == nil {
          deadline = now + 5
          RequestReading.handOff()  // the forgets come as requests
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
  func checkCanRemove(_ name: UnsafePointer<CChar>, in parent: Inode) throws(Errno) {
    guard SandboxLayout.allowsRemoval(of: CName(name), in: layoutParent(parent)) else { throw .notPermitted }
  }
}

/// A NUL-terminated C name viewed as bytes, without copying.
struct CName: RandomAccessCollection {
  let buffer: UnsafeBufferPointer<UInt8>

  init(_ name: UnsafePointer<CChar>) {
    buffer = UnsafeBufferPointer(start: UnsafeRawPointer(name).assumingMemoryBound(to: UInt8.self), count: strlen(name))
  }

  var startIndex: Int { 0 }
  var endIndex: Int { buffer.count }
  subscript(position: Int) -> UInt8 { buffer[position] }

  /// A copy of the bytes.
  var bytes: [UInt8] { Array(buffer) }
}
