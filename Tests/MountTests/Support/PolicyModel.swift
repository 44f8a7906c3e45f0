import CPosixShim
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - The policy model of the differential test
//
// The local directory mirrors the mount root (Documents, Library/Caches, tmp). What a
// plain directory does not know is kept here: the lock state, each item's protection
// class, how the daemon serves each open handle (cached, O_DIRECT, passthrough), and what
// purges removed. The table is spelled here (not taken from SandboxPolicy), so that a
// wrong table in the product cannot make its own test pass.

/// docs/reference.md's Data Protection table for the states this test visits (UNLOCKED and LOCKED; the CX timeout is
/// set far beyond the run, so CX is C here).
enum PolicyTable {
  /// A protected operation on a regular file.
  enum Access { case createNew, openExisting, handleIO }

  /// Whether the table allows `access` to a file of `protectionClass` (else EPERM).
  static func allows(_ protectionClass: TestClass, _ access: Access, locked: Bool) -> Bool {
    switch protectionClass {
    case .A: return !locked
    case .B: return access != .openExisting || !locked
    case .C, .CX, .D: return true
    }
  }

  /// Whether I/O on a handle stays allowed whatever the device does next: such read-only
  /// opens are served by passthrough (README, Limits and choices).
  static func staysAllowed(_ protectionClass: TestClass, locked: Bool) -> Bool {
    allows(protectionClass, .handleIO, locked: locked) && protectionClass != .A && protectionClass != .CX
  }

  /// Values a program may write to `user.appbox.protection`, with the class each means
  /// (nil: EINVAL).
  static let classValues: [(value: String, class: TestClass?)] = [
    ("complete", .A), ("A", .A), ("NSFileProtectionComplete", .A), ("1", .A), ("completeUnlessOpen", .B), ("B", .B),
    ("2", .B), ("completeUntilFirstUserAuthentication", .C), ("C", .C), ("3", .C), ("none", .D), ("D", .D),
    ("NSFileProtectionNone", .D), ("4", .D), ("completeWhenUserInactive", .CX), ("CX", .CX), ("7", .CX),
    ("bogus", nil), ("", nil),
  ]

  /// The class a value of the class attribute means (nil: EINVAL).
  static func parse(_ value: [UInt8]) -> TestClass? {
    classValues.first { Array($0.value.utf8) == value }?.class
  }
}

/// How the daemon serves an open handle of a regular file.
enum ModelHandleKind { case cached, direct, passthrough }

/// One open slot as the model sees it.
struct ModelSlot {
  /// The mirror's inode of the open file.
  var ino: UInt64
  /// The flags it was opened with (on the mount).
  var flags: Int32
  /// How the daemon serves it (nil: not a regular file).
  var kind: ModelHandleKind?
  var isRegular: Bool
}

/// What a policy rule expects of one operation on the mount.
struct Expectation {
  /// Refusals the mount may answer instead of doing the operation (nothing changes then).
  var refusals: Set<Int32> = []
  /// The operation must not succeed on the mount (a refusal the table demands).
  var mustFail = false
  /// The operation to apply to the local mirror instead (names and values translated).
  var local: Operation?
  /// The mount's exact outcome, when the local mirror cannot produce it.
  var exact: DiffOutcome?
  /// A rule for the report.
  var rule = ""
}

/// The model's state beside the local mirror.
struct PolicyModel {
  /// The class attribute on the mount (and, holding what was set explicitly, in the mirror).
  static let protectionName = "user.appbox.protection"
  /// A name in AppBox's reserved namespace that it does not define (EPERM).
  static let reservedName = "user.appbox.bogus"
  /// Where the mirror keeps Apple's names, which a plain Linux directory refuses (as the
  /// backing store does).
  static let foreignPrefix = "user.appbox.x."
  /// Apple's backup-exclusion attributes.
  static let appleNames = ["com.apple.MobileBackup", "com.apple.metadata:com_apple_backup_excludeItem"]

  let localRoot: String
  /// Whether the daemon serves read-only opens by passthrough (`appbox status`).
  let passthroughAvailable: Bool
  /// LOCKED (grace 0) or UNLOCKED.
  var locked = false
  /// The class each local inode got at creation from its directory.
  var inherited: [UInt64: TestClass] = [:]
  /// The open slots, as the daemon serves them.
  var slots = [ModelSlot?](repeating: nil, count: OperationGenerator.slotCount)
  /// Local inodes a read-write handle opened while passthrough handles were open: the
  /// daemon keeps them without holes from then on (docs/architecture.md, "Passthrough and
  /// the quota"). Never dropped here (the daemon drops one with its last name, when
  /// nothing is open): a stale entry only lets the model accept more ENOSPC.
  var writeMapped: Set<UInt64> = []
  /// Bytes written through passthrough handles (charged at release, so `used` may pass
  /// the capacity by up to this much).
  var passthroughBytes = 0

  init(localRoot: String, passthroughAvailable: Bool) {
    self.localRoot = localRoot
    self.passthroughAvailable = passthroughAvailable
  }

  /// The mirror's path for a path relative to the mount root.
  func full(_ path: String) -> String { path.isEmpty ? localRoot : localRoot + "/" + path }

  // MARK: Paths and classes

  /// The local path a path resolves to (intermediate symlinks followed, the last one when
  /// `followLast`), or nil when it leaves the tree or cannot be resolved.
  func locate(_ path: String, followLast: Bool) -> String? {
    var current = full(path)
    for _ in 0..<40 {
      guard let slash = current.lastIndex(of: "/") else { return nil }
      let directory = String(current[..<slash])
      let name = String(current[current.index(after: slash)...])
      guard let resolved = realpath(directory.isEmpty ? "/" : directory, nil) else { return nil }
      let real = String(cString: resolved)
      free(resolved)
      guard real == localRoot || real.hasPrefix(localRoot + "/") else { return nil }
      let candidate = real + "/" + name
      var info = stat()
      if followLast, lstat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFLNK {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink(candidate, &buffer, buffer.count - 1)
        guard count >= 0 else { return nil }
        let target = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        current = target.hasPrefix("/") ? target : real + "/" + target
        continue
      }
      return candidate
    }
    return nil
  }

  /// `lstat` of a local path.
  /// Whether a file below a local directory has a link outside it.
  static func holdsLinkOutside(_ directory: String) -> Bool {
    var links: [UInt64: (seen: Int, total: Int)] = [:]
    guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return false }
    for case let relative as String in enumerator {
      guard let info = lstatOf(directory + "/" + relative), info.st_mode & S_IFMT != S_IFDIR, info.st_nlink > 1
      else { continue }
      links[UInt64(info.st_ino), default: (0, Int(info.st_nlink))].seen += 1
    }
    return links.values.contains { $0.seen < $0.total }
  }

  static func lstatOf(_ path: String) -> stat? {
    var info = stat()
    return lstat(path, &info) == 0 ? info : nil
  }

  /// The class of the item at a local path (a file or directory, not a symlink).
  func protectionClass(ofLocal path: String) -> TestClass {
    guard let info = Self.lstatOf(path) else { return .C }
    var buffer = [UInt8](repeating: 0, count: 256)
    let count = cposix_getxattr(path, Self.protectionName, &buffer, buffer.count)
    if count > 0, let explicit = PolicyTable.parse(Array(buffer[..<count])) { return explicit }
    return inherited[UInt64(info.st_ino)] ?? .C
  }

  /// The class of an open local descriptor's file.
  func protectionClass(ofLocalFD fd: Int32) -> TestClass {
    var info = stat()
    guard fstat(fd, &info) == 0 else { return .C }
    var buffer = [UInt8](repeating: 0, count: 256)
    let count = cposix_getxattr("/proc/self/fd/\(fd)", Self.protectionName, &buffer, buffer.count)
    if count > 0, let explicit = PolicyTable.parse(Array(buffer[..<count])) { return explicit }
    return inherited[UInt64(info.st_ino)] ?? .C
  }

  /// The storage domain of a local path (by where it lies in the mirror).
  func domain(ofLocal path: String) -> String {
    let relative = path.dropFirst(localRoot.count + 1)
    if relative.hasPrefix("Library/Caches/") { return "caches" }
    if relative.hasPrefix("tmp/") { return "tmp" }
    return "other"
  }

  /// Handles the daemon holds on a local inode, by kind (`cached` with the direct ones,
  /// which keep passthrough off as well).
  func handles(of ino: UInt64) -> (cached: Int, passthrough: Int) {
    var counts = (cached: 0, passthrough: 0)
    for slot in slots.compactMap({ $0 }) where slot.ino == ino {
      // A direct handle counts as a cached one (SandboxFilesystem.opened).
      if slot.kind == .cached || slot.kind == .direct { counts.cached += 1 }
      if slot.kind == .passthrough { counts.passthrough += 1 }
    }
    return counts
  }

  /// Whether the daemon keeps the file of local inode `ino` without holes: passthrough
  /// handles are open on it, or a read-write handle joined them.
  func keepsHolesFilled(_ ino: UInt64) -> Bool {
    handles(of: ino).passthrough > 0 || writeMapped.contains(ino)
  }

  /// Bytes the daemon allocates for `operation` beyond what it asks for, in a file it
  /// keeps without holes: the gap a write, or an allocation that extends the file, leaves
  /// before its offset; a truncate's growth; a punched range (zeroed instead). Nil when
  /// none (judged before the operation, on the mirror, which has the mount's sizes).
  func holeFill(_ operation: Operation, localFDs: [Int32]) -> Int? {
    func size(ofSlot slot: Int) -> (ino: UInt64, size: Int)? {
      guard let open = slots[slot], open.isRegular, keepsHolesFilled(open.ino) else { return nil }
      var info = stat()
      guard fstat(localFDs[slot], &info) == 0 else { return nil }
      return (open.ino, Int(info.st_size))
    }
    let extra: Int
    switch operation {
    case .pwrite(let slot, let offset, let data):
      guard !data.isEmpty, let file = size(ofSlot: slot) else { return nil }
      extra = offset - file.size
    case .ftruncate(let slot, let length):
      guard let file = size(ofSlot: slot) else { return nil }
      extra = length - file.size
    case .fallocate(let slot, let mode, let offset, let length):
      guard let file = size(ofSlot: slot) else { return nil }
      if mode & cposix_falloc_punch_hole() != 0 { return length }
      extra = mode & cposix_falloc_keep_size() == 0 ? offset - file.size : 0
    case .truncate(let path, let length):
      guard let target = locate(path, followLast: true), let info = Self.lstatOf(target),
        info.st_mode & S_IFMT == S_IFREG, keepsHolesFilled(UInt64(info.st_ino))
      else { return nil }
      extra = length - Int(info.st_size)
    default:
      return nil
    }
    return extra > 0 ? extra : nil
  }

  /// Whether the file open on the mount as `mountFD` has holes below its end (no
  /// passthrough then), as `SEEK_HOLE` on the mount finds them (the daemon answers it from
  /// the backing file), below the size of the mirror's file `localFD` (the mount's size;
  /// the kernel's cached attributes may lag behind the daemon's `st_blocks`).
  static func hasHoles(mountFD: Int32, localFD: Int32) -> Bool {
    var info = stat()
    guard mountFD >= 0, fstat(localFD, &info) == 0 else { return true }
    guard info.st_size > 0 else { return false }
    return lseek(mountFD, 0, cposix_seek_hole()) < info.st_size
  }

  /// Local inode numbers held open in slots.
  var openInodes: Set<UInt64> { Set(slots.compactMap { $0?.ino }) }

  // MARK: Expectations

  /// What the policy expects of `operation` (paths relative to the mount root), judged
  /// before it runs, from the local mirror (equal to the mount so far).
  func expectation(_ operation: Operation, localFDs: [Int32]) -> Expectation {
    var expect = Expectation()
    switch operation {
    case .open(let path, let flags, _, _):
      return openExpectation(path, flags: flags)
    case .writeFile(let path, _, _):
      return openExpectation(path, flags: O_WRONLY | O_CREAT)
    case .readFile(let path):
      return openExpectation(path, flags: O_RDONLY)
    case .truncate(let path, _):
      guard let target = locate(path, followLast: true), let info = Self.lstatOf(target),
        info.st_mode & S_IFMT == S_IFREG
      else { return expect }
      if !PolicyTable.allows(protectionClass(ofLocal: target), .openExisting, locked: locked) {
        expect.refusals = [EPERM]
        expect.mustFail = true
        expect.rule = "truncate by path is an open of an existing file (docs/reference.md#data-protection)"
      }
    case .pwrite(let slot, _, let data):
      if !data.isEmpty { expect = handleExpectation(slot, localFDs: localFDs, needsWrite: true) }
    case .pread(let slot, let offset, let count):
      guard count > 0 else { return expect }
      expect = handleExpectation(slot, localFDs: localFDs, needsRead: true)
      // Through the page cache the kernel answers a read at or past the end itself.
      var info = stat()
      if expect.mustFail, slots[slot]?.kind == .cached, fstat(localFDs[slot], &info) == 0, offset >= info.st_size {
        expect = Expectation()
      }
    case .ftruncate(let slot, _), .fallocate(let slot, _, _, _):
      expect = handleExpectation(slot, localFDs: localFDs, needsWrite: true)
    case .rename(let from, let to, let flags):
      guard let source = locate(from, followLast: false), let target = locate(to, followLast: false),
        domain(ofLocal: source) != domain(ofLocal: target), let sourceInfo = Self.lstatOf(source)
      else { return expect }
      let exchanged = flags & cposix_rename_exchange() != 0 ? Self.lstatOf(target) : nil
      let staying = { (info: stat, path: String) in
        info.st_mode & S_IFMT == S_IFDIR ? Self.holdsLinkOutside(path) : info.st_nlink > 1
      }
      if staying(sourceInfo, source) || exchanged.map({ staying($0, target) }) == true {
        expect.refusals = [EXDEV]
        expect.mustFail = true
        expect.rule = "a file with a link that would stay behind never changes storage domain (EXDEV)"
      }
    case .link(let from, let to):
      guard let source = locate(from, followLast: false), let target = locate(to, followLast: false),
        domain(ofLocal: source) != domain(ofLocal: target)
      else { return expect }
      expect.refusals = [EXDEV]
      expect.mustFail = true
      expect.rule = "hard links stay within a domain (EXDEV)"
    case .setxattr(let path, let name, let value, let flags):
      return setxattrExpectation(path, name: name, value: value, flags: flags)
    case .getxattr(let path, let name, let size):
      if name == Self.reservedName { return Self.reserved() }
      if Self.appleNames.contains(name) {
        expect.local = .getxattr(path: path, name: Self.foreignPrefix + name, size: size)
      }
      if name == Self.protectionName, let target = locate(path, followLast: true), Self.lstatOf(target) != nil {
        let value = Array(protectionClass(ofLocal: target).name.utf8)
        var outcome = DiffOutcome()
        if size == 0 {
          outcome.result = value.count
        } else if size < value.count {
          outcome.result = -1
          outcome.error = ERANGE
        } else {
          outcome.result = value.count
          outcome.data = value
        }
        expect.exact = outcome
        expect.rule = "the class attribute reads the item's class"
      }
    case .removexattr(let path, let name):
      if name == Self.reservedName { return Self.reserved() }
      if Self.appleNames.contains(name) { expect.local = .removexattr(path: path, name: Self.foreignPrefix + name) }
      if name == Self.protectionName, let target = locate(path, followLast: true), let info = Self.lstatOf(target) {
        let current = protectionClass(ofLocal: target)
        let fallback = inherited[UInt64(info.st_ino)] ?? .C
        let isFile = info.st_mode & S_IFMT != S_IFDIR
        if isFile,
          !PolicyTable.allows(current, .openExisting, locked: locked)
            || !PolicyTable.allows(fallback, .openExisting, locked: locked)
        {
          expect.refusals = [EPERM]
          expect.mustFail = true
          expect.rule = "changing a file's class needs its current and its new class accessible"
        } else if !PolicyTable.staysAllowed(fallback, locked: locked), handles(of: UInt64(info.st_ino)).passthrough > 0
        {
          expect.refusals = [EBUSY]
          expect.mustFail = true
          expect.rule = "a file open by passthrough keeps a class that cannot refuse it (EBUSY)"
        }
      }
    default:
      break
    }
    return expect
  }

  /// A refusal of a reserved attribute name.
  private static func reserved() -> Expectation {
    Expectation(refusals: [EPERM], mustFail: true, rule: "user.appbox. names are reserved (EPERM)")
  }

  /// An open (or the open inside a whole-file read or write) of an existing file or of a
  /// new name.
  private func openExpectation(_ path: String, flags: Int32) -> Expectation {
    var expect = Expectation()
    let creates = flags & O_CREAT != 0
    let exclusive = creates && flags & O_EXCL != 0
    guard let target = locate(path, followLast: !exclusive && flags & cposix_o_nofollow() == 0) else { return expect }
    if let info = Self.lstatOf(target) {
      guard info.st_mode & S_IFMT == S_IFREG, !exclusive, flags & cposix_o_directory() == 0 else { return expect }
      if !PolicyTable.allows(protectionClass(ofLocal: target), .openExisting, locked: locked) {
        expect.refusals = [EPERM]
        expect.mustFail = true
        expect.rule = "open existing (docs/reference.md#data-protection)"
      }
    } else if creates, let slash = target.lastIndex(of: "/"),
      let parent = Self.lstatOf(String(target[..<slash])), parent.st_mode & S_IFMT == S_IFDIR
    {
      if !PolicyTable.allows(protectionClass(ofLocal: String(target[..<slash])), .createNew, locked: locked) {
        expect.refusals = [EPERM]
        expect.mustFail = true
        expect.rule = "create new in the directory's class (docs/reference.md#data-protection)"
      }
    }
    return expect
  }

  /// I/O on a slot's handle: refused when its file's class is closed now (a handle the
  /// access mode forbids fails in the kernel first).
  private func handleExpectation(_ slot: Int, localFDs: [Int32], needsRead: Bool = false, needsWrite: Bool = false)
    -> Expectation
  {
    guard let model = slots[slot], model.isRegular else { return Expectation() }
    let mode = model.flags & O_ACCMODE
    if needsRead && mode == O_WRONLY || needsWrite && mode == O_RDONLY { return Expectation() }
    guard !PolicyTable.allows(protectionClass(ofLocalFD: localFDs[slot]), .handleIO, locked: locked) else {
      return Expectation()
    }
    return Expectation(
      refusals: [EPERM], mustFail: true, rule: "I/O on a handle opened earlier (docs/reference.md#data-protection)")
  }

  /// A `setxattr`: Apple's names are mirrored under ``foreignPrefix``; the class attribute
  /// is parsed, needs the current class accessible and no passthrough handle on the way to
  /// a class that may refuse, and is stored canonical.
  private func setxattrExpectation(_ path: String, name: String, value: [UInt8], flags: Int32) -> Expectation {
    var expect = Expectation()
    if name == Self.reservedName { return Self.reserved() }
    if Self.appleNames.contains(name) {
      expect.local = .setxattr(path: path, name: Self.foreignPrefix + name, value: value, flags: flags)
      return expect
    }
    guard name == Self.protectionName, let target = locate(path, followLast: true), let info = Self.lstatOf(target)
    else { return expect }
    let type = info.st_mode & S_IFMT
    guard type == S_IFREG || type == S_IFDIR else { return Self.reserved() }
    guard let requested = PolicyTable.parse(value) else {
      return Expectation(refusals: [EINVAL], mustFail: true, rule: "an unknown class is EINVAL")
    }
    if type == S_IFREG,
      !PolicyTable.allows(protectionClass(ofLocal: target), .openExisting, locked: locked)
        || !PolicyTable.allows(requested, .openExisting, locked: locked)
    {
      return Expectation(
        refusals: [EPERM], mustFail: true,
        rule: "changing a file's class needs its current and its new class accessible (a directory's changes always)")
    }
    if !PolicyTable.staysAllowed(requested, locked: locked), handles(of: UInt64(info.st_ino)).passthrough > 0 {
      return Expectation(
        refusals: [EBUSY], mustFail: true,
        rule: "a file open by passthrough keeps a class that cannot refuse it (EBUSY)"
      )
    }
    // Stored in its canonical spelling.
    expect.local = .setxattr(path: path, name: name, value: Array(requested.name.utf8), flags: flags)
    return expect
  }

  // MARK: Keeping the model in step

  /// Where `operation` may create an item, and whether something is there now (call
  /// before the operation; ``created(_:before:)`` after).
  func creationSite(_ operation: Operation) -> (path: String, existed: Bool)? {
    let site: String?
    switch operation {
    case .open(let path, let flags, _, _) where flags & O_CREAT != 0:
      site = locate(path, followLast: flags & O_EXCL == 0)
    case .writeFile(let path, _, _): site = locate(path, followLast: true)
    case .mkdir(let path, _), .symlink(_, let path): site = locate(path, followLast: false)
    default: site = nil
    }
    return site.map { ($0, Self.lstatOf($0) != nil) }
  }

  /// Gives an item created at `site` its directory's class (a symlink none).
  mutating func created(at site: (path: String, existed: Bool)?) {
    guard let site, !site.existed, let info = Self.lstatOf(site.path), let slash = site.path.lastIndex(of: "/")
    else { return }
    let ino = UInt64(info.st_ino)
    if info.st_mode & S_IFMT == S_IFLNK {
      inherited[ino] = nil
    } else {
      inherited[ino] = protectionClass(ofLocal: String(site.path[..<slash]))
    }
  }

  /// Records a slot opened (or closed: `fd` < 0) on the local side, with the kind of
  /// handle the daemon gives it (README: passthrough joins a passthrough file, else a
  /// read-only open of a class that stays allowed of a file without holes (as the mount's
  /// `mountFD` shows them), else O_DIRECT, else cached).
  mutating func slotChanged(_ slot: Int, localFD fd: Int32, mountFD: Int32 = -1, flags: Int32) {
    slots[slot] = nil
    guard fd >= 0 else { return }
    var info = stat()
    guard fstat(fd, &info) == 0 else { return }
    let ino = UInt64(info.st_ino)
    let isRegular = info.st_mode & S_IFMT == S_IFREG
    var kind: ModelHandleKind?
    if isRegular {
      let counts = handles(of: ino)
      let mayPassthrough =
        passthroughAvailable && flags & cposix_o_direct() == 0 && flags & O_ACCMODE == O_RDONLY
        && PolicyTable.staysAllowed(protectionClass(ofLocalFD: fd), locked: locked)
        && !Self.hasHoles(mountFD: mountFD, localFD: fd)
      if counts.passthrough > 0 || mayPassthrough && counts.cached == 0 {
        kind = .passthrough
        if flags & O_ACCMODE == O_RDWR { writeMapped.insert(ino) }
      } else {
        kind = flags & cposix_o_direct() != 0 || flags & O_ACCMODE == O_WRONLY ? .direct : .cached
      }
    }
    slots[slot] = ModelSlot(ino: ino, flags: flags, kind: kind, isRegular: isRegular)
  }
}

// MARK: - Purge events

/// Reads the daemon's event log as it grows (JSON Lines), keeping the purge events.
struct EventLogReader {
  let path: String
  private var offset: off_t = 0
  private var partial: [UInt8] = []

  /// A reader of the event log at `path`, from its start.
  init(path: String) { self.path = path }

  /// The purge events appended since the last call.
  mutating func newPurges() -> [[String: Any]] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 65536)
    var purges: [[String: Any]] = []
    while true {
      let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
      guard count > 0 else { break }
      offset += off_t(count)
      partial += buffer[..<count]
    }
    while let newline = partial.firstIndex(of: 0x0A) {
      let line = Array(partial[..<newline])
      partial.removeFirst(newline + 1)
      if let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any],
        object["type"] as? String == "purge"
      {
        purges.append(object)
      }
    }
    return purges
  }
}
