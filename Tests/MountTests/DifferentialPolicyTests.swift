// Randomized differential test with the policies on: the random operations of
// DifferentialTests, in Documents, Library/Caches and tmp of a small sandbox, mixed with
// lock and unlock, explicit purges, protection classes, Apple's and reserved attribute
// names, every fallocate mode and O_DIRECT opens. A local directory mirrors the whole
// mount; a model (Support/PolicyModel.swift) knows what a plain directory cannot: the
// lock state and each item's class (SPEC §2's table decides what must be EPERM), how the
// daemon serves each handle, and what purges removed (read from the event log and
// applied to the mirror, after checking them against the purge rules). Then every result
// must still agree, and at the end the trees, `used` against `du`, and the daemon's log.
//
// Environment: APPBOX_DIFF_SEED and APPBOX_DIFF_OPS, as for DifferentialTests; to hunt a
// bookkeeping error down, APPBOX_DIFF_BOOKS_EVERY=N compares `used` with `du` every N
// operations (stopping at the first difference) and APPBOX_DIFF_TRACE=1 prints each step.
import CPosixShim
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Differential with the policies: purges, locks, classes, xattrs", .needsFUSE, .timeLimit(.minutes(10)))
struct DifferentialPolicyTests {
  static let defaultSeed: UInt64 = 0xA9B0_C0DE_2024_0012
  static let defaultCount = 5000
  static let capacity: Int64 = 1 << 20

  @Test("random operations with purges, lock changes and classes agree with a model, and the books with du")
  func randomOperationsWithPolicies() throws {
    let environment = ProcessInfo.processInfo.environment
    let seed = environment["APPBOX_DIFF_SEED"].flatMap(DifferentialTests.parseSeed) ?? Self.defaultSeed
    let count = environment["APPBOX_DIFF_OPS"].flatMap { Int($0) } ?? Self.defaultCount
    print("DifferentialPolicyTests: seed \(seed) (0x\(String(seed, radix: 16))), \(count) operations")

    let fixture = try MountFixture(arguments: [
      "--unlocked", "--grace", "0", "--cx-timeout", "1h", "--capacity", String(Self.capacity),
    ])
    let localRoot = fixture.root + "/policy-local"
    for directory in ["", "/Documents", "/Library", "/Library/Caches", "/tmp"] {
      try #require(mkdir(localRoot + directory, 0o755) == 0)
    }
    for root in PolicyRun.roots {
      try #require(mkdir(localRoot + "/" + root, 0o755) == 0 && mkdir(fixture.path(root), 0o755) == 0)
    }
    let passthrough = try Quota.status(fixture.mountpoint)["passthrough"] as? Bool ?? false
    var run = try PolicyRun(fixture: fixture, localRoot: localRoot, seed: seed, passthrough: passthrough)
    let started = Date()
    let booksEvery = environment["APPBOX_DIFF_BOOKS_EVERY"].flatMap { Int($0) } ?? 0
    for index in 0..<count {
      try run.step(index)
      if run.failure != nil { break }
      if booksEvery > 0, index % booksEvery == 0 || index >= count - booksEvery {
        run.settleHandles()
        let used = Quota.number(try Quota.status(fixture.mountpoint), "used")
        let du = try Quota.du(fixture.backing)
        if used != du {
          print("DifferentialPolicyTests: after operation #\(index): used \(used), du \(du)")
          break
        }
      }
    }
    try run.finishOperations()
    print("DifferentialPolicyTests: " + run.tallyLine)
    print(
      "DifferentialPolicyTests: \(count) operations in \(String(format: "%.1f", Date().timeIntervalSince(started))) s"
        + (passthrough ? "" : " (passthrough off)") + (run.failure != nil ? " (stopped at the first mismatch)" : ""))
    if let failure = run.failure {
      Issue.record("seed \(seed): \(failure)")
    } else {
      try run.checkFinalState()
    }
    let log = ControlFiles.path(for: fixture.mountpoint, "log")
    try fixture.unmount()
    // A notification the kernel refused is logged by libfuse as "fuse: writing device: …".
    let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")  // throws if it is not there
    let failed = lines.filter { $0.contains("writing device") }
    #expect(
      failed.isEmpty, "seed \(seed): the daemon's log has failed notifications:\n\(failed.joined(separator: "\n"))")
  }
}

/// One run: the two sides, the model, and the operations drawn so far.
struct PolicyRun {
  /// Where operations happen (relative to the mount root and to the mirror).
  static let roots = ["Documents/pdiff", "Library/Caches/pdiff", "tmp/pdiff"]
  static let zeroRange: Int32 = 0x10
  static let fallocateModes: [Int32] = [
    0, cposix_falloc_keep_size(), cposix_falloc_punch_hole() | cposix_falloc_keep_size(), zeroRange,
  ]

  let fixture: MountFixture
  let seed: UInt64
  var random: SeededGenerator
  var generator: OperationGenerator
  var local: DifferentialSide
  var mounted: DifferentialSide
  var model: PolicyModel
  var events: EventLogReader
  var trees: [LocalTree] = []
  var tally: [String: (ok: Int, failed: Int)] = [:]
  var failure: String?
  var index = 0
  /// APPBOX_DIFF_TRACE set: every step is printed before it runs.
  let trace = ProcessInfo.processInfo.environment["APPBOX_DIFF_TRACE"] != nil

  init(fixture: MountFixture, localRoot: String, seed: UInt64, passthrough: Bool) throws {
    self.fixture = fixture
    self.seed = seed
    random = SeededGenerator(seed: seed ^ 0x5EED_0F_B011C1E5)
    generator = OperationGenerator(seed: seed)
    local = DifferentialSide(root: localRoot)
    mounted = DifferentialSide(root: fixture.mountpoint)
    model = PolicyModel(localRoot: localRoot, passthroughAvailable: passthrough)
    events = EventLogReader(path: ControlFiles.path(for: fixture.mountpoint, "events"))
    refreshTrees()
  }

  mutating func refreshTrees() {
    trees = Self.roots.map { DifferentialSide(root: local.root + "/" + $0).tree() }
  }

  mutating func count(_ kind: String, ok: Bool) {
    if ok { tally[kind, default: (0, 0)].ok += 1 } else { tally[kind, default: (0, 0)].failed += 1 }
  }

  var tallyLine: String {
    tally.keys.sorted().map { "\($0) \(tally[$0]!.ok)/\(tally[$0]!.failed)" }.joined(separator: ", ")
  }

  func fail(_ text: String) -> String {
    "APPBOX_DIFF_SEED=\(seed) APPBOX_DIFF_OPS=\(index + 1), operation #\(index): \(text)"
  }

  // MARK: Drawing

  enum Step {
    case posix(Operation)
    case lock, unlock
    case purge([String])
  }

  /// Draws the next step: mostly the plain generator's operations (in one of the three
  /// roots, sometimes aimed across domains), and the policy's own.
  mutating func draw() -> Step {
    let roll = random.below(1000)
    switch roll {
    case 0..<12: return model.locked ? .unlock : .lock
    case 12..<17:
      return .purge(
        random.pick([
          ["--bytes", "\(random.inRange(4...1536))K"], ["--bytes", "\(random.inRange(4...1536))K"],
          ["--domain", "tmp", "--all"], ["--domain", "caches", "--all"],
        ]))
    default: break
    }
    let rootIndex = random.pick([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    let root = Self.roots[rootIndex]
    let tree = trees[rootIndex]
    let entry = random.chance(85) && !tree.entries.isEmpty ? random.pick(tree.entries) : ""
    let file = random.chance(80) && !tree.files.isEmpty ? random.pick(tree.files) : entry
    var operation: Operation
    switch roll {
    case 22..<62:
      let name = PolicyModel.protectionName
      switch random.below(10) {
      case 0..<6:
        let value = random.pick(PolicyTable.classValues).value
        operation = .setxattr(path: entry, name: name, value: Array(value.utf8), flags: random.chance(80) ? 0 : 1)
      case 6..<9: operation = .getxattr(path: entry, name: name, size: random.pick([0, 4, 256]))
      default: operation = .removexattr(path: entry, name: name)
      }
    case 62..<92:
      let name = random.pick(PolicyModel.appleNames + PolicyModel.appleNames + [PolicyModel.reservedName])
      switch random.below(10) {
      case 0..<5:
        let value =
          name.hasSuffix("MobileBackup") ? [1] : random.chance(50) ? random.bytes(61) : Array("com.apple.backupd".utf8)
        operation = .setxattr(path: entry, name: name, value: value, flags: Int32(random.below(3)))
      case 5..<7: operation = .getxattr(path: entry, name: name, size: random.pick([0, 1, 65536]))
      case 7..<8: operation = .removexattr(path: entry, name: name)
      default: operation = .listxattr(path: entry)
      }
    case 92..<120:
      let flags = random.pick([
        O_RDWR, O_RDONLY, O_RDWR | O_CREAT, O_WRONLY | O_CREAT | O_TRUNC, O_RDWR | O_APPEND,
      ])
      operation = .open(
        path: file, flags: flags | cposix_o_direct(), mode: 0o644, slot: random.below(OperationGenerator.slotCount))
    case 120..<170 where rootIndex > 0:
      // Pressure: a large write into Caches or tmp, which fits only once older files go.
      let path = random.chance(50) && !tree.files.isEmpty ? file : random.pick(OperationGenerator.names)
      operation = .writeFile(
        path: path, offset: random.pick([0, 0, 4096]), data: random.bytes(random.inRange(32_768...393_216)))
    default:
      operation = generator.next(openSlots: local.openSlots, tree: tree)
    }
    if case .fallocate(let slot, _, let offset, let length) = operation {
      operation = .fallocate(slot: slot, mode: random.pick(Self.fallocateModes), offset: offset, length: length)
    }
    let other = random.chance(15) ? random.pick(Self.roots.filter { $0 != root }) : nil
    return .posix(Self.prefixed(operation, root, across: other))
  }

  /// `operation` with its paths below `root` (a rename's or link's destination below
  /// `across` when given).
  static func prefixed(_ operation: Operation, _ root: String, across: String?) -> Operation {
    func inRoot(_ path: String) -> String { path.isEmpty ? root : root + "/" + path }
    func destination(_ path: String) -> String {
      guard let across else { return inRoot(path) }
      return path.isEmpty ? across : across + "/" + path
    }
    switch operation {
    case .open(let path, let flags, let mode, let slot):
      return .open(path: inRoot(path), flags: flags, mode: mode, slot: slot)
    case .writeFile(let path, let offset, let data): return .writeFile(path: inRoot(path), offset: offset, data: data)
    case .readFile(let path): return .readFile(path: inRoot(path))
    case .truncate(let path, let length): return .truncate(path: inRoot(path), length: length)
    case .rename(let from, let to, let flags): return .rename(from: inRoot(from), to: destination(to), flags: flags)
    case .link(let from, let to): return .link(from: inRoot(from), to: destination(to))
    case .unlink(let path): return .unlink(path: inRoot(path))
    case .mkdir(let path, let mode): return .mkdir(path: inRoot(path), mode: mode)
    case .rmdir(let path): return .rmdir(path: inRoot(path))
    case .symlink(let target, let path): return .symlink(target: target, path: inRoot(path))
    case .readlink(let path): return .readlink(path: inRoot(path))
    case .chmod(let path, let mode): return .chmod(path: inRoot(path), mode: mode)
    case .setxattr(let path, let name, let value, let flags):
      return .setxattr(path: inRoot(path), name: name, value: value, flags: flags)
    case .getxattr(let path, let name, let size): return .getxattr(path: inRoot(path), name: name, size: size)
    case .removexattr(let path, let name): return .removexattr(path: inRoot(path), name: name)
    case .listxattr(let path): return .listxattr(path: inRoot(path))
    case .stat(let path, let follow): return .stat(path: inRoot(path), follow: follow)
    case .readdir(let path): return .readdir(path: inRoot(path))
    default: return operation
    }
  }

  // MARK: Running

  mutating func step(_ index: Int) throws {
    self.index = index
    let step = draw()
    if trace { print("DifferentialPolicyTests: #\(index): \(step)") }
    switch step {
    case .lock: try changeLock(locked: true)
    case .unlock: try changeLock(locked: false)
    case .purge(let arguments): try purge(arguments)
    case .posix(let operation): apply(operation)
    }
  }

  /// `appbox lock` or `unlock` (grace 0: LOCKED at once).
  mutating func changeLock(locked: Bool) throws {
    let verb = locked ? "lock" : "unlock"
    let result = try Command.run(Command.appbox, [verb, fixture.mountpoint])
    guard result.status == 0 else {
      failure = fail("appbox \(verb) exited \(result.status): \(result.error)")
      return
    }
    let state = locked ? "LOCKED" : "UNLOCKED"
    guard fixture.waitUntil({ fixture.deviceState == state }) else {
      failure = fail("the device state stayed \(fixture.deviceState ?? "?") after appbox \(verb)")
      return
    }
    model.locked = locked
    count(verb, ok: true)
  }

  /// `appbox purge MOUNT ARGUMENTS`, then the purge rules.
  mutating func purge(_ arguments: [String]) throws {
    settleHandles()
    let result = try Command.run(Command.appbox, ["purge", fixture.mountpoint] + arguments)
    guard result.status == 0 else {
      failure = fail("appbox purge \(arguments) exited \(result.status): \(result.error)")
      return
    }
    let purged = purgesSince(reason: "explicit", arguments: arguments)
    count("purge " + arguments.dropLast(arguments.last == "--all" ? 0 : 1).joined(separator: " "), ok: purged > 0)
  }

  /// Waits until the daemon holds exactly the handles of the open slots: a close is
  /// released asynchronously, and open handles decide passthrough and what a purge may take.
  func settleHandles() {
    guard let pid = fixture.daemonPID else { return }
    let expected = mounted.slots.filter { $0 >= 0 }.count
    _ = fixture.waitUntil { MountFixture.openFileHandles(of: pid).count == expected }
  }

  /// The paths an operation's outcome reports the state of.
  static func touchedPaths(_ operation: Operation) -> [String] {
    switch operation {
    case .open(let path, _, _, _), .writeFile(let path, _, _), .truncate(let path, _), .unlink(let path),
      .mkdir(let path, _), .rmdir(let path), .symlink(_, let path), .chmod(let path, _), .setxattr(let path, _, _, _),
      .removexattr(let path, _):
      return [path]
    case .rename(let from, let to, _), .link(let from, let to): return [from, to]
    default: return []
    }
  }

  /// Operations that may need quota, so may purge under pressure (or fail with ENOSPC;
  /// not a `setxattr`, which takes its block if it can).
  static func reserves(_ operation: Operation) -> Bool {
    switch operation {
    case .pwrite(_, _, let data), .writeFile(_, _, let data): return !data.isEmpty
    case .fallocate(_, let mode, _, _): return mode & cposix_falloc_punch_hole() == 0
    case .mkdir, .setxattr: return true
    default: return false
    }
  }

  /// Bytes a reserving operation asks for.
  static func need(_ operation: Operation) -> Int {
    switch operation {
    case .pwrite(_, _, let data), .writeFile(_, _, let data): return data.count
    case .fallocate(_, _, _, let length): return length
    default: return 4096
    }
  }

  mutating func apply(_ operation: Operation) {
    let kind = String(operation.description.prefix { $0.isLetter || $0 == " " }.split(separator: " ").first ?? "")
    let direct: Bool
    if case .open(_, let flags, _, let slot) = operation {
      direct = flags & cposix_o_direct() != 0
      // Close the slot's previous handle first and let the daemon release it: the new
      // handle's kind depends on what else is open.
      if local.slots[slot] >= 0 || mounted.slots[slot] >= 0 {
        _ = local.apply(.close(slot: slot))
        _ = mounted.apply(.close(slot: slot))
        model.slotChanged(slot, localFD: -1, flags: 0)
      }
    } else {
      direct = false
    }
    let reserving = Self.reserves(operation)
    switch operation {
    case .open, .setxattr, .removexattr: settleHandles()
    default: if reserving { settleHandles() }
    }
    let site = model.creationSite(operation)
    let expect = model.expectation(operation, localFDs: local.slots)
    let label = (direct ? "O_DIRECT " : "") + "\(operation)"

    let actual = mounted.apply(operation)
    var expected: DiffOutcome
    if actual.error != 0, expect.refusals.contains(actual.error) {
      // Refused: nothing may have changed on the mount.
      expected = actual
      expected.after = Self.touchedPaths(operation).map { local.state($0) }
      switch operation {
      case .pwrite(let slot, _, _), .ftruncate(let slot, _), .fallocate(let slot, _, _, _):
        expected.summary = local.describe(fd: local.slots[slot])
      default: break
      }
      count("refused " + DiffOutcome.errnoName(actual.error), ok: true)
    } else if expect.mustFail, actual.error == 0 {
      failure = fail(
        "\(label) succeeded on the mount, but \(expect.rule) (class, device \(model.locked ? "LOCKED" : "UNLOCKED"))\n  mount: \(actual)"
      )
      return
    } else if let exact = expect.exact {
      expected = exact
      count(kind, ok: exact.error == 0)
    } else if reserving,
      actual.error == ENOSPC
        || actual.error == 0 && actual.result < Self.need(operation)
          && Self.isWrite(operation)
    {
      expected = noSpace(operation, actual)
      count("ENOSPC or short", ok: true)
    } else {
      expected = local.apply(expect.local ?? withoutDirect(operation))
      if case .listxattr = operation { expected = Self.mountNames(expected) }
      count(kind, ok: expected.error == 0)
    }
    if expected != actual, failure == nil {
      failure = fail(
        """
        \(label)
          expected: \(expected)
          mount:    \(actual)\(DiffOutcome.dataDifference(expected, actual))
        """)
      return
    }
    if failure != nil { return }
    model.created(at: site)
    switch operation {
    case .open(_, let flags, _, let slot): model.slotChanged(slot, localFD: local.slots[slot], flags: flags)
    case .close(let slot): model.slotChanged(slot, localFD: -1, flags: 0)
    case .link(let from, _):
      if actual.error == 0, let info = PolicyModel.lstatOf(local.full(from)) {
        model.onceLinked.insert(UInt64(info.st_ino))
      }
    case .pwrite(let slot, _, _):
      // Through passthrough, unless O_DIRECT (FOPEN_DIRECT_IO: through the daemon).
      if let open = model.slots[slot], open.kind == .passthrough, open.flags & cposix_o_direct() == 0, actual.result > 0
      {
        model.passthroughBytes += actual.result
      }
    default: break
    }
    if reserving { _ = purgesSince(reason: "pressure", arguments: [], busy: busyTarget(operation)) }
    if operation.changesNamespace { refreshTrees() }
  }

  static func isWrite(_ operation: Operation) -> Bool {
    switch operation {
    case .pwrite, .writeFile: return true
    default: return false
    }
  }

  /// The local operation for a mount operation with `O_DIRECT` on a file (a plain
  /// directory would demand aligned buffers; the mount does not). Directories refuse
  /// `O_DIRECT` on both sides (EINVAL).
  func withoutDirect(_ operation: Operation) -> Operation {
    guard case .open(let path, let flags, let mode, let slot) = operation else { return operation }
    if let target = model.locate(path, followLast: flags & cposix_o_nofollow() == 0),
      let info = PolicyModel.lstatOf(target), info.st_mode & S_IFMT == S_IFDIR
    {
      return operation
    }
    return .open(path: path, flags: flags & ~cposix_o_direct(), mode: mode, slot: slot)
  }

  /// A local `listxattr` outcome as the mount shows the names (Apple's names are kept
  /// under `user.appbox.x.` in the mirror, as in the backing store).
  static func mountNames(_ outcome: DiffOutcome) -> DiffOutcome {
    guard outcome.error == 0, let summary = outcome.summary, summary.hasPrefix("names [") else { return outcome }
    var result = outcome
    let inner = summary.dropFirst("names [".count).dropLast()
    let names = inner.isEmpty ? [] : inner.components(separatedBy: ", ").map { String($0.dropFirst().dropLast()) }
    let shown = names.map { $0.hasPrefix(PolicyModel.foreignPrefix) ? String($0.dropFirst(14)) : $0 }.sorted()
    result.summary = "names \(shown)"
    result.result = shown.reduce(0) { $0 + $1.utf8.count + 1 }
    return result
  }

  /// An operation the mount could not (or only partly) do for want of space: checks that
  /// it had to, and does on the mirror what the mount did.
  mutating func noSpace(_ operation: Operation, _ actual: DiffOutcome) -> DiffOutcome {
    let busy = busyTarget(operation)
    _ = purgesSince(reason: "pressure", arguments: [], busy: busy)
    let free = (try? Quota.statfs(fixture.mountpoint)).map { Int($0.f_bavail) * 4096 } ?? 0
    let left = purgeableFiles(domain: nil).filter { $0.ino != busy }
    let purgeable = left.reduce(0) { $0 + $1.bytes }
    if free + purgeable >= Self.need(operation) + 2 * 4096 {
      failure = fail(
        "\(operation): \(actual), though \(free) bytes are free and \(purgeable) purgeable (\(left.map(\.path)))")
    }
    var expected = actual
    switch operation {
    case .pwrite(let slot, let offset, let data):
      if actual.error == 0 {
        expected = local.apply(.pwrite(slot: slot, offset: offset, data: Array(data.prefix(actual.result))))
      } else {
        expected.summary = local.describe(fd: local.slots[slot])
      }
    case .writeFile(let path, let offset, let data):
      expected = local.apply(.writeFile(path: path, offset: offset, data: Array(data.prefix(max(0, actual.result)))))
      if actual.error != 0 {
        expected.result = actual.result
        expected.error = actual.error
      }
    case .fallocate(let slot, _, _, _):
      expected.summary = local.describe(fd: local.slots[slot])
    default:
      expected.after = Self.touchedPaths(operation).map { local.state($0) }
    }
    return expected
  }

  // MARK: Purges

  /// A purgeable file of the mirror: regular, one link, in Caches or tmp, not open.
  struct Purgeable {
    var path: String
    var ino: UInt64
    var bytes: Int
    var domain: String
  }

  /// The mirror's regular files in Caches and tmp (relative paths), with their `lstat`.
  func purgeableCandidates() -> [(path: String, info: stat)] {
    var found: [(String, stat)] = []
    func visit(_ relative: String) {
      guard let names = try? TreeComparison.names(in: TreePath(local.full(relative))) else { return }
      for name in names {
        let path = relative + "/" + TreePath(name).description
        guard let info = PolicyModel.lstatOf(local.full(path)) else { continue }
        if info.st_mode & S_IFMT == S_IFDIR {
          visit(path)
        } else if info.st_mode & S_IFMT == S_IFREG {
          found.append((path, info))
        }
      }
    }
    visit("Library/Caches")
    visit("tmp")
    return found
  }

  /// What a purge may take now (bytes as the backing store has them allocated).
  func purgeableFiles(domain: String?) -> [Purgeable] {
    let open = model.openInodes
    return purgeableCandidates().compactMap { path, info in
      let fileDomain = path.hasPrefix("tmp/") ? "tmp" : "caches"
      guard info.st_nlink == 1, !open.contains(UInt64(info.st_ino)), !model.onceLinked.contains(UInt64(info.st_ino)),
        domain == nil || domain == fileDomain,
        let backing = PolicyModel.lstatOf(fixture.backingPath(path))
      else { return nil }
      return Purgeable(path: path, ino: UInt64(info.st_ino), bytes: Int(backing.st_blocks) * 512, domain: fileDomain)
    }
  }

  /// The file an operation holds open while it reserves space (a purge leaves it alone).
  func busyTarget(_ operation: Operation) -> UInt64? {
    switch operation {
    case .writeFile(let path, _, _), .setxattr(let path, _, _, _):
      return model.locate(path, followLast: true).flatMap(PolicyModel.lstatOf).map { UInt64($0.st_ino) }
    default: return nil
    }
  }

  /// Finds what purges removed since the last look (files of the mirror's Caches and tmp
  /// gone from the backing store), matches them with the event log's purge events, checks
  /// the purge rules, and removes them from the mirror.
  /// - Returns: the number of files purged.
  @discardableResult
  mutating func purgesSince(reason: String, arguments: [String], busy: UInt64? = nil) -> Int {
    let candidates = purgeableCandidates()
    let gone = candidates.filter { PolicyModel.lstatOf(fixture.backingPath($0.path)) == nil }
    var purges = events.newPurges()
    if !gone.isEmpty {
      _ = Quota.poll { () -> Bool in
        purges += events.newPurges()
        return purges.count >= gone.count
      }
    }
    guard !gone.isEmpty || !purges.isEmpty else { return 0 }
    let paths = purges.compactMap { $0["path"] as? String }
    var problems: [String] = []
    if Set(paths) != Set(gone.map(\.path)) || paths.count != gone.count {
      problems.append("purge events \(paths) but files gone from the backing store \(gone.map(\.path))")
    }
    let open = model.openInodes
    for (path, info) in gone {
      if open.contains(UInt64(info.st_ino)) { problems.append("\(path) was purged while a slot holds it open") }
      if info.st_nlink != 1 { problems.append("\(path) was purged with \(info.st_nlink) links") }
    }
    for path in paths where !(path.hasPrefix("Library/Caches/") || path.hasPrefix("tmp/")) {
      problems.append("\(path) was purged outside Caches and tmp")
    }
    for event in purges where event["reason"] as? String != reason {
      problems.append("purge of \(event["path"] ?? "?") has reason \(event["reason"] ?? "?"), expected \(reason)")
    }
    // Remove them from the mirror, then judge what a purge left behind.
    for (path, _) in gone { unlink(local.full(path)) }
    let tookCaches = paths.contains { $0.hasPrefix("Library/Caches/") }
    let leftTmp = purgeableFiles(domain: "tmp").filter { $0.bytes > 0 && $0.ino != busy }
    if tookCaches, reason == "pressure" || arguments.first == "--bytes", !leftTmp.isEmpty {
      problems.append("Caches files purged while tmp still had \(leftTmp.map(\.path)) (tmp goes first)")
    }
    if arguments.last == "--all" {
      let domain = arguments[1]
      if let other = paths.first(where: { !$0.hasPrefix(domain == "tmp" ? "tmp/" : "Library/Caches/") }) {
        problems.append("--domain \(domain) --all purged \(other)")
      }
      let left = purgeableFiles(domain: domain)
      if !left.isEmpty { problems.append("--domain \(domain) --all left \(left.map(\.path))") }
    }
    // The kernel is told after a pressure purge's write returns: wait for it to forget.
    let forgotten = fixture.waitUntil { gone.allSatisfy { Quota.statError(fixture.path($0.path)) == ENOENT } }
    if !forgotten { problems.append("the mount still shows purged files \(gone.map(\.path))") }
    if !problems.isEmpty, failure == nil {
      failure = fail("\(reason) purge \(arguments): " + problems.joined(separator: "; "))
    }
    tally["purged (\(reason))", default: (0, 0)].ok += gone.count
    refreshTrees()
    return gone.count
  }

  // MARK: The end

  /// Closes every slot and unlocks (the final comparison reads every file).
  mutating func finishOperations() throws {
    if model.locked { try changeLock(locked: false) }
    local.closeAll()
    mounted.closeAll()
    for slot in model.slots.indices { model.slotChanged(slot, localFD: -1, flags: 0) }
  }

  /// The final trees against the mirror, the backing store, and the books against `du`.
  mutating func checkFinalState() throws {
    #expect(Quota.waitForReleases(fixture))
    purgesSince(reason: "pressure", arguments: [])
    if let failure { Issue.record("seed \(seed): \(failure)") }
    var mount = TreeComparison()
    mount.xattrName = { name in
      name.starts(with: Array(PolicyModel.foreignPrefix.utf8)) ? Array(name.dropFirst(14)) : name
    }
    var backing = TreeComparison()
    backing.xattrFilter = { !XattrNames.isAppBoxInternal($0) }
    for top in ["Documents", "Library/Caches", "tmp"] {
      let problems = try mount.differences(local.full(top), fixture.path(top))
      #expect(problems.isEmpty, "seed \(seed): \(top) differs:\n\(problems.joined(separator: "\n"))")
      let backingProblems = try backing.differences(local.full(top), fixture.backingPath(top))
      #expect(
        backingProblems.isEmpty, "seed \(seed): backing \(top) differs:\n\(backingProblems.joined(separator: "\n"))")
    }
    let status = try Quota.status(fixture.mountpoint)
    let used = Quota.number(status, "used")
    let du = try Quota.du(fixture.backing)
    #expect(used == du, "seed \(seed): status used \(used) != du \(du) (diff \(used - du))")
    // Writes through passthrough handles are charged at release, not refused one by one.
    let allowance = Int64(model.passthroughBytes + 4095) / 4096 * 4096
    #expect(
      used <= DifferentialPolicyTests.capacity + allowance,
      "seed \(seed): used \(used) > capacity \(DifferentialPolicyTests.capacity) + passthrough writes \(allowance)")
    print(
      "DifferentialPolicyTests: used \(used), du \(du), capacity \(DifferentialPolicyTests.capacity), written by passthrough \(model.passthroughBytes), purges \(Quota.number(status, "purges"))"
    )
  }
}
