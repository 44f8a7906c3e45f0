import CPosixShim
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// One run: the two sides, the model, and the operations drawn so far.
struct PolicyRun {
  /// Where operations happen (relative to the mount root and to the mirror).
  static let roots = ["Documents/pdiff", "Library/Caches/pdiff", "tmp/pdiff"]
  /// `FALLOC_FL_ZERO_RANGE` (not in the shim).
  static let zeroRange: Int32 = 0x10
  /// The fallocate modes drawn: allocate, keep size, punch a hole, zero a range.
  static let fallocateModes: [Int32] = [
    0, cposix_falloc_keep_size(), cposix_falloc_punch_hole() | cposix_falloc_keep_size(), zeroRange,
  ]

  let fixture: MountFixture
  let seed: UInt64
  /// The policy's own draws (the plain generator keeps its own sequence).
  var random: SeededGenerator
  var generator: OperationGenerator
  /// The mirror of the mount root, and the mount.
  var local: DifferentialSide
  var mounted: DifferentialSide
  var model: PolicyModel
  var events: EventLogReader
  /// What exists in each of ``roots`` (from the mirror), for drawing paths.
  var trees: [LocalTree] = []
  /// Per kind of step: how many succeeded and failed.
  var tally: [String: (ok: Int, failed: Int)] = [:]
  /// The first disagreement, with what replays it; the run stops there.
  var failure: String?
  /// The step running now.
  var index = 0
  /// APPBOX_DIFF_TRACE set: every step is printed before it runs.
  let trace = ProcessInfo.processInfo.environment["APPBOX_DIFF_TRACE"] != nil

  /// A run over `fixture`'s mount and the mirror at `localRoot` (both prepared).
  init(fixture: MountFixture, localRoot: String, seed: UInt64, passthrough: Bool) throws {
    self.fixture = fixture
    self.seed = seed
    random = SeededGenerator(seed: seed ^ 0x5EED_0F_B011C1E5)
    generator = OperationGenerator(seed: seed)
    local = DifferentialSide(root: localRoot)
    mounted = DifferentialSide(root: fixture.mountpoint)
    model = PolicyModel(localRoot: localRoot, passthroughAvailable: passthrough)
    events = EventLogReader(path: try #require(ControlFiles.eventLog(for: fixture.mountpoint)))
    refreshTrees()
  }

  /// Reads ``trees`` again (after a change of names).
  mutating func refreshTrees() {
    trees = Self.roots.map { DifferentialSide(root: local.root + "/" + $0).tree() }
  }

  /// Counts one step of `kind`.
  mutating func count(_ kind: String, ok: Bool) {
    if ok { tally[kind, default: (0, 0)].ok += 1 } else { tally[kind, default: (0, 0)].failed += 1 }
  }

  /// The tally, one line, for the test's output.
  var tallyLine: String {
    tally.keys.sorted().map { "\($0) \(tally[$0]!.ok)/\(tally[$0]!.failed)" }.joined(separator: ", ")
  }

  /// A failure message that says how to replay the run to this step.
  func fail(_ text: String) -> String {
    "APPBOX_DIFF_SEED=\(seed) APPBOX_DIFF_OPS=\(index + 1), operation #\(index): \(text)"
  }

  // MARK: Drawing

  /// One step: an operation on both sides, or a control command on the mount.
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

  /// Draws and runs step `index`.
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
  /// A directory held open holds no handle of the daemon: the kernel opens a single-app
  /// mount's directories itself (docs/architecture.md).
  func settleHandles() {
    let expected = mounted.slots.indices.filter { mounted.slots[$0] >= 0 && model.slots[$0]?.isRegular != false }.count
    let settled = fixture.waitUntil { fixture.openFileHandles().count == expected }
    #expect(settled, "the daemon holds \(fixture.openFileHandles()), the slots \(expected) files")
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

  /// Runs an operation on the mount, then what the model expects on the mirror, and
  /// compares; keeps the model in step (new items' classes, slots, purges).
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
    // A file the daemon keeps without holes allocates what would be one, within the quota.
    let fill = model.holeFill(operation, localFDs: local.slots)
    let reserving = Self.reserves(operation) || fill != nil
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
      expected = noSpace(operation, actual, filling: fill ?? 0)
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
    case .open(_, let flags, _, let slot):
      model.slotChanged(slot, localFD: local.slots[slot], mountFD: mounted.slots[slot], flags: flags)
    case .close(let slot): model.slotChanged(slot, localFD: -1, flags: 0)
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

  /// Whether the operation writes data (so may come back short).
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
  /// `filling`: what the daemon allocates beyond the operation's own bytes (a hole it fills).
  mutating func noSpace(_ operation: Operation, _ actual: DiffOutcome, filling: Int = 0) -> DiffOutcome {
    let busy = busyTarget(operation)
    _ = purgesSince(reason: "pressure", arguments: [], busy: busy)
    let free = (try? Quota.statfs(fixture.mountpoint)).map { Int($0.f_bavail) * 4096 } ?? 0
    let left = purgeableFiles(domain: nil).filter { $0.ino != busy }
    let purgeable = left.reduce(0) { $0 + $1.bytes }
    if free + purgeable >= Self.need(operation) + filling + 2 * 4096 {
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
}
