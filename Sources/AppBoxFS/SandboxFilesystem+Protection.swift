import AppBoxEvents
import Dispatch
import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Data Protection: classes, checks, refusals, lock transitions

extension SandboxFilesystem {
  /// An inode's class, loaded once: the one a program set, else the one it got at
  /// creation, else the container default. A stored class that names no class, or that
  /// cannot be read, counts as ``ProtectionClass/strictest`` and is reported
  /// (docs/reference.md, Data Protection).
  func protectionClass(of inode: Inode) -> ProtectionClass {
    if let known = inode.cachedProtection { return known }
    let (record, attribute) = storedProtection(of: inode)
    if record.isUnusable { reportUnusableClass(record, attribute: attribute, of: inode) }
    let value = record.protectionClass ?? options.defaultProtection
    inode.cachedProtection = value
    return value
  }

  /// The first of the class attributes `names` that the backing inode has (its own class,
  /// then the one it inherited), with that attribute's name; ``StoredProtection/absent``
  /// when it has none. Only `ENODATA` means "none": any other error reading one is
  /// ``StoredProtection/unreadable(errno:)``, which counts as the strictest class.
  func storedProtection(
    of inode: Inode, names: [String] = [AppBoxAttribute.protection.name, AppBoxAttribute.inheritedProtectionName]
  ) -> (StoredProtection, attribute: String) {
    for name in names {
      let record: StoredProtection
      do throws(Errno) {
        record = StoredProtection(value: try Xattr.value(inode.fd, name: name))
      } catch  where error == .noData {
        continue
      } catch {
        record = .unreadable(errno: error.rawValue)
      }
      return (record, name)
    }
    return (.absent, names.last ?? "")
  }

  /// Reports a class record AppBox cannot use: an `unreadableClass` event, once per file
  /// (``UnreadableClasses``); a read error also goes to the daemon's log and counts as an
  /// internal error.
  func reportUnusableClass(_ record: StoredProtection, attribute: String, of inode: Inode) {
    var value: [UInt8]?
    var errorName: String?
    switch record {
    case .unparsable(let bytes): value = bytes
    case .unreadable(let errno):
      let error = Errno(rawValue: errno)
      errorName = error.name
      internalError(
        .classRead, error,
        "cannot read \(attribute) of \(String(decoding: mountPath(of: inode), as: UTF8.self)); it counts as complete")
    case .absent, .valid: return
    }
    guard unreadableClasses.isFirstReport(inode.key) else { return }
    let event = UnreadableClassEvent(
      time: Clock.unix(), pathBytes: mountPath(of: inode), attribute: attribute, value: value, error: errorName)
    events.record(.unreadableClass(event))
  }

  /// Refuses (EPERM, counted and logged) `operation` on a class the lock state forbids.
  @inline(__always)
  func check(
    _ operation: ProtectedOperation, _ protectionClass: ProtectionClass, path: @autoclosure () -> [UInt8],
    in container: ContainerNumber
  ) throws(Errno) {
    let snapshot = protection.snapshot
    if AccessRule.decide(protectionClass, operation, in: snapshot) { return }
    var event = ProtectionEvent(
      time: Clock.unix(), pathBytes: path(), protectionClass: protectionClass, operation: operation,
      state: snapshot.state)
    event.container = containerName(container)
    protection.recordRefusal(protectionClass, operation)
    events.refused(event)
    throw .notPermitted
  }

  /// Checks `operation` on an existing inode.
  @inline(__always)
  func check(_ operation: ProtectedOperation, _ inode: Inode) throws(Errno) {
    try check(operation, protectionClass(of: inode), path: mountPath(of: inode), in: inode.container)
  }

  /// Stores the class a new item inherits (hidden from `listxattr`: the program did not
  /// set it) and caches it. The container default is not stored (items without a class
  /// have it), which saves an attribute write per create. `openFD`, when the item is open,
  /// saves a path resolution. Returns whether an attribute was written.
  /// - Throws: the attribute write's error (the item would otherwise fall back to the
  ///   default class once the cached one is dropped).
  @discardableResult
  func assignProtection(_ protectionClass: ProtectionClass, to inode: Inode, openFD: Int32?) throws(Errno) -> Bool {
    guard protectionClass != options.defaultProtection else {
      inode.cachedProtection = protectionClass
      return false
    }
    let value = Array(protectionClass.name.utf8)
    let name = AppBoxAttribute.inheritedProtectionName
    if let openFD {
      try Xattr.set(openFile: openFD, name: name, value: value)
    } else {
      try Xattr.set(inode.fd, name: name, value: value)
    }
    inode.cachedProtection = protectionClass
    return true
  }

  /// The path of an inode below the mount root, for events (`/`-joined bytes). Display
  /// only, never a decision: an inode whose path cannot be read (`/proc/self/fd`), or that
  /// has none below the root any more (unlinked), is named by the empty path.
  func mountPath(of inode: Inode) -> [UInt8] {
    guard let full = try? Sys.path(of: inode.fd), full.starts(with: backingPath) else { return [] }
    return Array(full.dropFirst(backingPath.count).drop { $0 == UInt8(ascii: "/") })
  }

  /// The path of `name` in `directory`, for events.
  func mountPath(of name: FileName, in directory: Inode) -> [UInt8] {
    let parent = mountPath(of: directory)
    return parent.isEmpty ? name.bytes : parent + [UInt8(ascii: "/")] + name.bytes
  }

  // MARK: Lock state changes

  /// Locks the simulated device.
  /// - Returns: the state now.
  public func lock() -> DeviceState {
    changeState { $0.lock() }
  }

  /// Unlocks the simulated device.
  /// - Returns: the state now.
  public func unlock() -> DeviceState {
    changeState { $0.unlock() }
  }

  /// The simulated device's state, as observers see it (see ``ProtectionState``).
  public var deviceState: DeviceState { protection.shown.state }

  /// Makes a change of the lock state take effect, one change at a time: requests are
  /// judged by the new state at once; for classes that just became inaccessible, what the
  /// kernel caches of their files (pages, mmaps) is dropped and the reads it serves itself
  /// (passthrough) are refused (``PassthroughRevocation``); only then is the change shown
  /// (status, the device-state attribute) and recorded as an event. Runs on a control or
  /// maintenance thread, never on a request thread (which never takes `stateChanges`).
  @discardableResult
  func changeState(
    _ body: (ProtectionState) -> (DeviceStateChange?, LockSnapshot, LockSnapshot)
  ) -> DeviceState {
    stateChanges.withLock { _ in
      let (change, old, new) = body(protection)
      let closed = LockSnapshot.classesBecomingInaccessible(from: old, to: new)
      if !closed.isEmpty, let notifier = notifier.withLock({ $0 }) {
        for inode in inodes.snapshot() where inode.isRegularFile {
          if let known = inode.cachedProtection, closed.contains(known) {
            guardPassthroughReads(of: inode, closed: true)
            // Dirty pages the kernel writes back now were written before the lock.
            inode.flushingForLock.store(true, ordering: .releasing)
            notifier.invalidateInode(inodes.node(inode))
            inode.flushingForLock.store(false, ordering: .releasing)
          }
        }
      }
      for inode in revocation.refusedInodes where AccessRule.decide(protectionClass(of: inode), .handleIO, in: new) {
        guardPassthroughReads(of: inode, closed: false)
      }
      protection.show(new)
      if let change {
        events.record(.state(DeviceStateEvent(time: Clock.unix(), change: change)))
      }
      scheduleLockTransition()
      return new.state
    }
  }

  /// Arms a timer for the next time-driven change (end of grace, CX timeout).
  func scheduleLockTransition() {
    guard let seconds = protection.secondsUntilNextTransition else { return }
    let delay = DispatchTimeInterval.nanoseconds(Int(min(seconds, 1e9) * 1e9) + 1_000_000)
    maintenance.asyncAfter(deadline: .now() + delay) { [weak self] in
      self?.changeState { $0.refresh() }
    }
  }
}
