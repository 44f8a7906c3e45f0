import FilesystemInterface
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Apps coming and going on a device
//
// `appbox app install` makes a container (and the groups it names that do not exist yet)
// under a staging name, then renames it into place; `appbox app remove` renames it (and the
// groups it was the last member of) to a staging name, takes everything in it off the books
// and unlinks it. Either way the rename is the moment of change: a crash before it leaves
// nothing changed, one after it is finished at the next mount (``DeviceBacking``), and a
// staging name is never seen on the mount. Both run on a control thread, one at a time with
// each other and with directories moving between domains (``domainMoves``); the kernel hears
// of the change once that lock is released.

/// Why `appbox app install` or `remove` changed nothing.
public enum AppChangeError: Error, CustomStringConvertible, Sendable {
  /// A plain mount: it has no apps.
  case notADevice
  /// What the device's rules refuse (``DeviceApps/Refusal``).
  case refused(DeviceApps.Refusal)
  /// The new containers do not fit, even after purging.
  case noSpace
  /// A system call failed.
  case system(String, Errno)

  public var description: String {
    switch self {
    case .notADevice: "not a device mount (mount with --device)"
    case .refused(let refusal): refusal.description
    case .noSpace: "no space for the app's containers, even after purging"
    case .system(let what, let error): "\(what): \(error)"
    }
  }
}

extension SandboxFilesystem {
  /// The apps and their groups on a device mount; nil on a plain mount.
  public var deviceApps: DeviceApps? { device?.apps }

  /// Installs `app` as a member of `groups`, making its container and those of the groups
  /// that do not exist yet. Never on a request thread.
  /// - Returns: the groups it created.
  /// - Throws: ``AppChangeError``; nothing changed then.
  @discardableResult
  public func installApp(_ app: ContainerIdentifier, groups: [ContainerIdentifier]) throws(AppChangeError)
    -> [ContainerIdentifier]
  {
    guard let device else { throw .notADevice }
    var notices: [(parent: UInt64, name: [UInt8])] = []
    defer { tellKernel(notices) }
    return try domainMoves.withLock { _ throws(AppChangeError) -> [ContainerIdentifier] in
      let created: [ContainerIdentifier]
      do throws(DeviceApps.Refusal) { created = try device.planInstall(app, groups: groups) } catch {
        throw .refused(error)
      }
      let made = created.map { (ContainerKind.group, $0) } + [(ContainerKind.app, app)]
      // A container's root, its fixed directories, its metadata file, and a name in its
      // parent: rounded up, what a new container takes on any filesystem AppBox knows.
      let need = made.reduce(Int64(0)) { $0 + Int64($1.0.fixedDirectories.count + 3) * AllocationBlocks.size }
      let reservation: Reservation
      do throws(Errno) { reservation = try reserveAll(need, area: StorageArea(.root)) } catch {
        throw .noSpace
      }
      var done: [(ContainerKind, ContainerIdentifier, ContainerNumber)] = []
      do throws(AppChangeError) {
        for (kind, id) in made {
          let number: ContainerNumber
          if kind == .group {
            number = device.addGroup(id)
          } else {
            do throws(DeviceApps.Refusal) { number = try device.install(app, groups: groups) } catch {
              throw .refused(error)
            }
          }
          done.append((kind, id, number))
          storage.books.withLock { $0.catalog.containerPaths[number] = DeviceLayout.components(of: kind, id) }
          notices.append(try makeContainer(kind, id, number: number))
        }
      } catch {
        reservation.cancel()
        notices += undo(done)
        throw error
      }
      reservation.cancel()  // what the containers took is charged as measured
      return created
    }
  }

  /// Makes one container under its staging name and renames it into place; charges what it
  /// takes and records its layout.
  /// - Returns: the directory it is in and its name, for the kernel.
  private func makeContainer(_ kind: ContainerKind, _ id: ContainerIdentifier, number: ContainerNumber)
    throws(AppChangeError) -> (parent: UInt64, name: [UInt8])
  {
    let staging = DeviceLayout.installingName(id)
    do throws(Errno) {
      let parentFD = try DeviceBacking.makeDirectories(kind.parentComponents, in: inodes.root.fd)
      defer { Sys.close(parentFD) }
      let before = try Sys.fstat(parentFD)
      try DeviceBacking.createContainer(
        ContainerMetadata(
          identifier: id, kind: kind, groups: device?.apps.apps[id] ?? [], uuid: DeviceBacking.newUUID()),
        in: parentFD, as: staging)
      do throws(Errno) {
        try FileName.withBytes(staging) { (from) throws(Errno) in
          try FileName.withBytes(id.bytes) { (to) throws(Errno) in
            try Sys.renameat2(parentFD, from.cString, parentFD, to.cString, Linux.renameNoReplace)
          }
        }
      } catch {
        do throws(Errno) { try TreeRemoval.remove(staging, in: parentFD) } catch let kept {
          log("app install: cannot remove the staged container of \(id) (\(kept)); the next mount removes it")
        }
        throw error
      }
      let containerFD = try DeviceBacking.makeDirectories([id.bytes], in: parentFD)
      defer { Sys.close(containerFD) }
      var roots: [StorageArea: UInt64] = [:]
      var layout: [UInt64: Inode.Place] = [:]
      try Self.containerLayout(kind, at: containerFD, number: number, roots: &roots, layout: &layout)
      domainRoots.withLock { $0.merge(roots) { $1 } }
      layoutInodes.withLock { $0.merge(layout) { $1 } }
      try chargeNewContainer(containerFD, kind: kind, number: number)
      settleLayoutDirectory(parentFD, before: before)
      return (UInt64(before.st_ino), id.bytes)
    } catch {
      throw .system("cannot make the container of \(id)", error)
    }
  }

  /// Charges a new container's root, metadata file and fixed directories to it.
  private func chargeNewContainer(_ fd: Int32, kind: ContainerKind, number: ContainerNumber) throws(Errno) {
    var charges: [(StorageArea, Int64)] = [(StorageArea(number, .root), Int64(try Sys.fstat(fd).st_blocks) * 512)]
    let metadata = try FileName.withBytes(DeviceLayout.metadataFileName) { (name) throws(Errno) -> stat in
      try Sys.fstatat(fd, name.cString, AT_SYMLINK_NOFOLLOW)
    }
    charges.append((StorageArea(number, .root), Int64(metadata.st_blocks) * 512))
    for directory in kind.fixedDirectories {
      let dirFD = try DeviceBacking.makeDirectories(directory.components, in: fd)
      defer { Sys.close(dirFD) }
      charges.append((StorageArea(number, directory.domain), Int64(try Sys.fstat(dirFD).st_blocks) * 512))
    }
    storage.books.withLock { books in
      for (area, bytes) in charges { books.ledger.charge(area, delta: bytes) }
    }
  }

  /// Measures a directory of the device's own after it gained or lost a container: through
  /// its inode when the kernel holds it (which keeps what it was charged), else by the
  /// difference to `before`. One that cannot be measured is charged a block more, the
  /// most one entry more can take (logged and counted; the next mount measures it).
  private func settleLayoutDirectory(_ fd: Int32, before: stat) {
    if let inode = inodes.existing(backingInode: UInt64(before.st_ino)) {
      account(inode, fd: inode.fd)
      return
    }
    do throws(Errno) {
      let after = try Sys.fstat(fd)
      storage.charge(Int64(after.st_blocks - before.st_blocks) * 512, area: StorageArea(.root))
    } catch {
      storage.charge(AllocationBlocks.size, area: StorageArea(.root))
      internalError(
        .measure, error, "cannot measure a directory of the device after a container change; a block is charged")
    }
  }

  /// Takes back what an install made before it failed: the containers registered (and
  /// perhaps renamed into place).
  private func undo(_ done: [(ContainerKind, ContainerIdentifier, ContainerNumber)]) -> [(
    parent: UInt64, name: [UInt8]
  )] {
    for (_, _, number) in done.reversed() { device?.discard(number) }
    return removeContainers(done)
  }

  /// Removes `app` and the groups it was the last member of: their containers, files and
  /// all, leave the books and the backing tree. Never on a request thread. The caller has
  /// checked that no program runs as the app.
  /// - Returns: the groups removed with it, files and bytes removed.
  /// - Throws: ``AppChangeError``; nothing changed then.
  @discardableResult
  public func removeApp(_ app: ContainerIdentifier) throws(AppChangeError) -> (
    groups: [ContainerIdentifier], files: Int, bytes: Int64
  ) {
    guard let device else { throw .notADevice }
    var notices: [(parent: UInt64, name: [UInt8])] = []
    defer { tellKernel(notices) }
    return try domainMoves.withLock { _ throws(AppChangeError) in
      do throws(DeviceApps.Refusal) { _ = try device.planRemove(app) } catch { throw .refused(error) }
      guard let number = device.number(of: .app, app) else { throw .refused(.notInstalled(app)) }
      // The moment of change: once renamed, the app is gone (the next mount finishes).
      let serial = removals.add(1, ordering: .relaxed).newValue
      do throws(Errno) { try stage(.app, app, serial: serial) } catch {
        throw .system("cannot remove the container of \(app)", error)
      }
      let removed: (app: ContainerNumber, groups: [(ContainerIdentifier, ContainerNumber)])
      do throws(DeviceApps.Refusal) { removed = try device.remove(app) } catch { throw .refused(error) }
      let numbers = Set([number] + removed.groups.map(\.1))
      _ = storage.beginRemoval(numbers)  // victims already committed to are unlinked in the staged tree
      var staged: [(ContainerKind, ContainerIdentifier, ContainerNumber)] = [(.app, app, number)]
      for (group, groupNumber) in removed.groups {
        do throws(Errno) {
          try stage(.group, group, serial: serial)
          staged.append((.group, group, groupNumber))
        } catch {
          log("app remove: cannot remove the group container of \(group) (\(error)); the next mount removes it")
        }
      }
      let before = storage.books.withLock { books in numbers.reduce(Int64(0)) { $0 + books.ledger.usage(of: $1) } }
      var files = 0
      for (kind, id, containerNumber) in staged {
        notices += removeStaged(kind, id, number: containerNumber, serial: serial, files: &files)
      }
      storage.endRemoval(numbers)
      forgetLayout(of: numbers)
      let after = storage.books.withLock { books in numbers.reduce(Int64(0)) { $0 + books.ledger.usage(of: $1) } }
      return (removed.groups.map(\.0), files, before - after)
    }
  }

  /// Renames a container to its staging name for removal.
  private func stage(_ kind: ContainerKind, _ id: ContainerIdentifier, serial: UInt64) throws(Errno) {
    let parentFD = try DeviceBacking.makeDirectories(kind.parentComponents, in: inodes.root.fd)
    defer { Sys.close(parentFD) }
    try FileName.withBytes(id.bytes) { (from) throws(Errno) in
      try FileName.withBytes(DeviceLayout.removingName(id, serial: serial)) { (to) throws(Errno) in
        try Sys.renameat2(parentFD, from.cString, parentFD, to.cString, Linux.renameNoReplace)
      }
    }
  }

  /// Unlinks a staged container, taking each entry off the books as it goes.
  /// - Returns: the directory it was in and its name, for the kernel.
  private func removeStaged(
    _ kind: ContainerKind, _ id: ContainerIdentifier, number: ContainerNumber, serial: UInt64, files: inout Int
  ) -> [(parent: UInt64, name: [UInt8])] {
    let name = DeviceLayout.removingName(id, serial: serial)
    let parentFD: Int32
    let before: stat
    do throws(Errno) {
      parentFD = try DeviceBacking.makeDirectories(kind.parentComponents, in: inodes.root.fd)
      before = try Sys.fstat(parentFD)
    } catch {
      log("app remove: cannot open the directory of \(id) (\(error)); the next mount removes it")
      return []
    }
    defer { Sys.close(parentFD) }
    do throws(Errno) {
      var removedFiles = 0
      let left = try TreeRemoval.remove(name, in: parentFD) { components, st in
        if st.st_mode & S_IFMT != S_IFDIR { removedFiles += 1 }
        uncharge(st, area: StorageArea(number, kind.classify(components: components)))
      }
      files += removedFiles
      if left > 0 {
        log("app remove: \(left) directories of \(id) were filled meanwhile; the next mount removes them")
      }
    } catch {
      log("app remove: cannot remove all of the container of \(id) (\(error)); the next mount removes the rest")
    }
    settleLayoutDirectory(parentFD, before: before)
    return [(UInt64(before.st_ino), id.bytes)]
  }

  /// Takes an unlinked entry of a removed container off the books: what its inode was
  /// charged, when the kernel holds it, else its blocks; a file with other links left is
  /// charged until its last one goes.
  private func uncharge(_ st: stat, area: StorageArea) {
    let isDirectory = st.st_mode & S_IFMT == S_IFDIR
    if !isDirectory, st.st_nlink > 1 {
      linkNames.forget(ino: UInt64(st.st_ino))
      return
    }
    // A file a program holds open stays charged until its last handle is released.
    let bytes =
      inodes.existing(backingInode: UInt64(st.st_ino)).map { inode in
        inode.allocated.withLock { charged in Self.giveBack(&charged, inode).0 }
      } ?? Int64(st.st_blocks) * 512
    if bytes != 0 { storage.charge(-bytes, area: area) }
  }

  /// Removes (for an install that failed) containers that were renamed into place.
  private func removeContainers(_ containers: [(ContainerKind, ContainerIdentifier, ContainerNumber)])
    -> [(parent: UInt64, name: [UInt8])]
  {
    let serial = removals.add(1, ordering: .relaxed).newValue
    let numbers = Set(containers.map(\.2))
    _ = storage.beginRemoval(numbers)
    var notices: [(parent: UInt64, name: [UInt8])] = []
    var files = 0
    for (kind, id, number) in containers {
      do throws(Errno) { try stage(kind, id, serial: serial) } catch {
        continue  // never renamed into place: nothing there
      }
      notices += removeStaged(kind, id, number: number, serial: serial, files: &files)
    }
    storage.endRemoval(numbers)
    forgetLayout(of: numbers)
    return notices
  }

  /// Drops what the filesystem knew of removed containers' layouts.
  private func forgetLayout(of numbers: Set<ContainerNumber>) {
    domainRoots.withLock { roots in roots = roots.filter { !numbers.contains($0.key.container) } }
    layoutInodes.withLock { layout in layout = layout.filter { !numbers.contains($0.value.container) } }
  }

  /// Tells the kernel that containers came or went in the directories given (backing
  /// inodes): their names are looked up again, their listings read again. Sent with no
  /// lock of the daemon held.
  private func tellKernel(_ notices: [(parent: UInt64, name: [UInt8])]) {
    guard !notices.isEmpty, let notifier = notifier.withLock({ $0 }) else { return }
    var listings = Set<UInt64>()
    for notice in notices {
      // Only a directory the kernel holds has entries to drop.
      guard let inode = inodes.existing(backingInode: notice.parent), inode.isDirectory else { continue }
      _ = notifier.invalidateEntry(parent: inodes.node(inode), name: notice.name)
      listings.insert(notice.parent)
    }
    for parent in listings {
      if let inode = inodes.existing(backingInode: parent) { _ = notifier.invalidateInode(inodes.node(inode)) }
    }
  }
}
