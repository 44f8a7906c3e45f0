import CPosixShim
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Purges and the end of a run

extension PolicyRun {
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
      guard info.st_nlink == 1, !open.contains(UInt64(info.st_ino)),
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
