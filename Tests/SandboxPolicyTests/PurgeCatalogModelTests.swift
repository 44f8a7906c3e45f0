import TestSupport
import Testing

@testable import SandboxPolicy

/// The obvious, slow implementation the catalog is compared with.
fileprivate struct ReferenceCatalog {
  struct File {
    var parent: PurgeCatalog.Parent
    var name: [UInt8]
    var bytes: Int64
    var urgency: PurgeUrgency
    var lastUse: UInt32
    var sequence: Int
    var openCount: Int
  }

  struct Directory {
    var parent: PurgeCatalog.Parent
    var name: [UInt8]
  }

  var files: [UInt64: File] = [:]
  var directories: [UInt64: Directory] = [:]
  var sequence = 0

  mutating func nextSequence() -> Int {
    sequence += 1
    return sequence
  }

  func domain(of parent: PurgeCatalog.Parent) -> StorageDomain {
    switch parent {
    case .root(let domain, _): return domain
    case .directory(let ino): return domain(of: directories[ino]!.parent)
    }
  }

  func directoryPath(_ parent: PurgeCatalog.Parent) -> [[UInt8]] {
    switch parent {
    case .root(let domain, _): return domain.rootComponents
    case .directory(let ino):
      let directory = directories[ino]!
      return directoryPath(directory.parent) + [directory.name]
    }
  }

  func isInside(_ parent: PurgeCatalog.Parent, _ ancestor: UInt64) -> Bool {
    guard case .directory(let ino) = parent else { return false }
    return ino == ancestor || isInside(directories[ino]!.parent, ancestor)
  }

  /// Files in purge order (open files included; callers filter).
  func ordered() -> [(UInt64, File)] {
    files.map { ($0.key, $0.value) }.sorted { l, r in
      let lr = domain(of: l.1.parent).purgeRank!
      let rr = domain(of: r.1.parent).purgeRank!
      if lr != rr { return lr < rr }
      if l.1.urgency != r.1.urgency { return l.1.urgency > r.1.urgency }
      if l.1.lastUse != r.1.lastUse { return l.1.lastUse < r.1.lastUse }
      return l.1.sequence < r.1.sequence
    }
  }

  func chooseVictims(toFree bytes: Int64) -> [UInt64] {
    guard bytes > 0 else { return [] }
    var freed: Int64 = 0
    var chosen: [UInt64] = []
    for (ino, file) in ordered() where file.openCount == 0 {
      if freed >= bytes { break }
      chosen.append(ino)
      freed += file.bytes
    }
    return chosen
  }

  func purgeable(_ domain: StorageDomain) -> Int64 {
    files.values.filter { self.domain(of: $0.parent) == domain && $0.openCount == 0 }
      .reduce(0) { $0 + $1.bytes }
  }
}

@Suite("PurgeCatalog against a reference model")
struct PurgeCatalogModelTests {
  @Test(arguments: [UInt64(1), 2, 3, 42])
  func randomOperationsMatchTheModel(seed: UInt64) throws {
    var random = SeededGenerator(seed: seed)
    let catalog = PurgeCatalog(compactionThreshold: 256)
    var model = ReferenceCatalog()
    var nextIno: UInt64 = 1
    var clock: UInt32 = 1000

    func randomName() -> [UInt8] {
      (0..<Int.random(in: 1...24, using: &random)).map { _ in
        Bool.random(using: &random)
          ? UInt8.random(in: 0x61...0x7A, using: &random)
          : UInt8.random(in: 1...255, using: &random)
      }
    }
    func randomTime() -> UInt32 {
      if Int.random(in: 0..<5, using: &random) == 0 {
        return UInt32.random(in: 900...clock, using: &random)
      }
      clock += UInt32.random(in: 0...2, using: &random)
      return clock
    }
    func randomParent() -> PurgeCatalog.Parent {
      let roll = Int.random(in: 0..<10, using: &random)
      if roll == 0 || model.directories.isEmpty { return .root(.tmp) }
      if roll == 1 { return .root(.caches) }
      return .directory(model.directories.keys.randomElement(using: &random)!)
    }
    func randomFile() -> UInt64? { model.files.keys.randomElement(using: &random) }

    func addFile() {
      let ino = nextIno
      nextIno += 1
      let parent = randomParent()
      let file = ReferenceCatalog.File(
        parent: parent, name: randomName(), bytes: Int64.random(in: 0...10_000, using: &random),
        urgency: PurgeUrgency.allCases.randomElement(using: &random)!, lastUse: randomTime(),
        sequence: model.nextSequence(), openCount: 0)
      model.files[ino] = file
      catalog.addFile(
        ino: ino, parent: parent, name: file.name, bytes: file.bytes, urgency: file.urgency,
        lastUse: file.lastUse)
    }

    // Start with a bulk load of unordered times, as at mount time.
    for _ in 0..<8 {
      let ino = nextIno
      nextIno += 1
      let parent: PurgeCatalog.Parent = model.directories.isEmpty ? .root(.caches) : randomParent()
      model.directories[ino] = .init(parent: parent, name: randomName())
      catalog.registerDirectory(ino: ino, parent: parent, name: model.directories[ino]!.name)
    }
    catalog.beginBulkLoad()
    for _ in 0..<300 { addFile() }
    catalog.endBulkLoad()

    for step in 0..<4000 {
      switch Int.random(in: 0..<100, using: &random) {
      case 0..<20:
        addFile()
      case 20..<28:
        if let ino = randomFile() {
          model.files[ino] = nil
          #expect(catalog.removeFile(ino: ino))
        }
      case 28..<38:
        if let ino = randomFile() {
          let parent = randomParent()
          let name = randomName()
          var file = model.files[ino]!
          if model.domain(of: parent) != model.domain(of: file.parent) {
            file.sequence = model.nextSequence()
          }
          file.parent = parent
          file.name = name
          model.files[ino] = file
          #expect(catalog.moveFile(ino: ino, to: parent, newName: name))
        }
      case 38..<58:
        if let ino = randomFile() {
          let time = randomTime()
          model.files[ino]!.lastUse = time
          model.files[ino]!.sequence = model.nextSequence()
          #expect(catalog.touch(ino: ino, at: time))
        }
      case 58..<63:
        if let ino = randomFile() {
          let urgency = PurgeUrgency.allCases.randomElement(using: &random)!
          if model.files[ino]!.urgency != urgency {
            model.files[ino]!.urgency = urgency
            model.files[ino]!.sequence = model.nextSequence()
          }
          catalog.setUrgency(ino: ino, urgency)
        }
      case 63..<68:
        if let ino = randomFile() {
          let bytes = Int64.random(in: 0...10_000, using: &random)
          model.files[ino]!.bytes = bytes
          catalog.setBytes(ino: ino, bytes)
        }
      case 68..<74:
        if let ino = randomFile() {
          if model.files[ino]!.openCount > 0 && Bool.random(using: &random) {
            model.files[ino]!.openCount -= 1
            catalog.close(ino: ino)
          } else {
            model.files[ino]!.openCount += 1
            catalog.open(ino: ino)
          }
        }
      case 74..<79:
        let ino = nextIno
        nextIno += 1
        let parent = randomParent()
        let name = randomName()
        model.directories[ino] = .init(parent: parent, name: name)
        catalog.registerDirectory(ino: ino, parent: parent, name: name)
      case 79..<83:
        guard let ino = model.directories.keys.randomElement(using: &random) else { break }
        let parent = randomParent()
        if model.isInside(parent, ino) { break }
        let name = randomName()
        let oldDomain = model.domain(of: .directory(ino))
        model.directories[ino] = .init(parent: parent, name: name)
        if model.domain(of: parent) != oldDomain {
          // Moved files keep their relative order and go after files already there.
          let moved = model.ordered().filter { model.isInside($0.1.parent, ino) }.map(\.0)
          for file in moved { model.files[file]!.sequence = model.nextSequence() }
        }
        #expect(catalog.renameDirectory(ino: ino, to: parent, newName: name))
      case 83..<85:
        let empty = model.directories.keys.filter { dir in
          !model.files.values.contains { $0.parent == .directory(dir) }
            && !model.directories.values.contains { $0.parent == .directory(dir) }
        }
        if let ino = empty.randomElement(using: &random) {
          model.directories[ino] = nil
          #expect(catalog.removeDirectory(ino: ino))
        }
      case 85..<86:
        guard let ino = model.directories.keys.randomElement(using: &random) else { break }
        let files = Set(model.files.filter { model.isInside($0.value.parent, ino) }.keys)
        let directories = model.directories.keys.filter { model.isInside(.directory($0), ino) }
        for file in files { model.files[file] = nil }
        for directory in directories { model.directories[directory] = nil }
        #expect(Set(catalog.removeSubtree(directory: ino)) == files)
      case 86..<94:
        let request = Int64.random(in: 0...60_000, using: &random)
        let victims = catalog.chooseVictims(toFree: request)
        try #require(victims.map(\.ino) == model.chooseVictims(toFree: request), "step \(step)")
        for victim in victims.prefix(3) {
          let file = model.files[victim.ino]!
          #expect(victim.name == file.name && victim.parent == file.parent)
          #expect(victim.bytes == file.bytes && victim.lastUse == file.lastUse)
          #expect(victim.domain == model.domain(of: file.parent) && victim.urgency == file.urgency)
        }
      case 94..<97:
        let time = UInt32.random(in: 900...clock, using: &random)
        let expected = model.ordered().filter { $0.1.openCount == 0 && $0.1.lastUse < time }
          .map(\.0)
        #expect(catalog.victims(olderThan: time).map(\.ino) == expected, "step \(step)")
      default:
        if let ino = randomFile() {
          let file = model.files[ino]!
          #expect(catalog.path(ofFile: ino) == model.directoryPath(file.parent) + [file.name])
          let entry = catalog.entry(ino: ino)
          #expect(entry?.openCount == file.openCount && entry?.bytes == file.bytes)
        }
        if let ino = model.directories.keys.randomElement(using: &random) {
          #expect(catalog.path(ofDirectory: ino) == model.directoryPath(.directory(ino)))
          #expect(catalog.domainOfDirectory(ino: ino) == model.domain(of: .directory(ino)))
        }
      }
      try #require(catalog.count == model.files.count, "step \(step)")
      #expect(catalog.directoryCount == model.directories.count)
    }
    #expect(catalog.purgeableBytes(domain: .tmp) == model.purgeable(.tmp))
    #expect(catalog.purgeableBytes(domain: .caches) == model.purgeable(.caches))
    #expect(
      catalog.victims(inDomain: .caches).map(\.ino)
        == model.ordered().filter { $0.1.openCount == 0 && model.domain(of: $0.1.parent) == .caches }.map(\.0))
    #expect(catalog.nameCompactions > 0)
  }
}
