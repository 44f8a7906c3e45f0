import Testing

@testable import SandboxPolicy

/// A device's policy: ids, its layout, which container and domain a path is in, the rules
/// of installing and removing apps, the device-wide purge order, usage per container.
@Suite("Device layout and rules")
struct DeviceLayoutTests {
  static func id(_ text: String) -> ContainerIdentifier { try! ContainerIdentifier(validating: text) }

  @Test(
    "reverse-DNS ids are taken",
    arguments: ["com.example.app", "group.com.example.shared", "a.b", "com.example.My-App2", "x.y.z.w.v"])
  func goodIdentifiers(_ text: String) throws {
    #expect(try ContainerIdentifier(validating: text).name == text)
    #expect(ContainerIdentifier(bytes: Array(text.utf8))?.name == text)
  }

  @Test(
    "ids that are not reverse-DNS names, or could leave their directory, are refused",
    arguments: [
      ("", ContainerIdentifier.Problem.empty),
      ("app", .notReverseDNS),
      ("..", .emptyComponent),
      (".", .emptyComponent),
      ("com..example", .emptyComponent),
      (".com.example", .emptyComponent),
      ("com.example.", .emptyComponent),
      ("com/example.app", .badCharacter(UInt8(ascii: "/"))),
      ("com.example\u{0}.app", .badCharacter(0)),
      ("com.example app", .badCharacter(UInt8(ascii: " "))),
      ("com.exämple", .badCharacter(0xC3)),
      ("com.example_app", .badCharacter(UInt8(ascii: "_"))),
      (".appbox-installing-com.example", .emptyComponent),
    ])
  func badIdentifiers(_ text: String, _ problem: ContainerIdentifier.Problem) {
    #expect(throws: problem) { try ContainerIdentifier(validating: text) }
    #expect(ContainerIdentifier(bytes: Array(text.utf8)) == nil)
  }

  @Test("an id of 217 bytes is taken, of 218 refused: every staging name of the longest id fits a file name")
  func overlongIdentifier() throws {
    let longest = "com." + String(repeating: "a", count: 213)
    let id = try ContainerIdentifier(validating: longest)
    #expect(id.bytes.count == 217)
    #expect(throws: ContainerIdentifier.Problem.tooLong(218)) { try ContainerIdentifier(validating: longest + "b") }
    #expect(DeviceLayout.installingName(id).count <= 255)
    #expect(DeviceLayout.removingName(id, serial: .max).count == 255)
  }

  @Test("paths below a device root are classified by container and domain")
  func classify() {
    func classify(_ path: String) -> (String?, String?, StorageDomain) {
      let components = path.split(separator: "/").map { Array($0.utf8) }
      let (container, domain) = DeviceLayout.classify(components: components)
      return (container.map { "\($0.0)" }, container.map { String(decoding: $0.1, as: UTF8.self) }, domain)
    }
    let app = "Containers/Data/Application/com.example.a"
    let group = "Containers/Shared/AppGroup/group.com.example"
    #expect(classify("") == (nil, nil, .root))
    #expect(classify("Containers/Data") == (nil, nil, .root))
    #expect(classify("Containers/Other/x") == (nil, nil, .root))
    #expect(classify(app) == ("app", "com.example.a", .root))
    #expect(classify(app + "/Documents/x/y") == ("app", "com.example.a", .documents))
    #expect(classify(app + "/Library/Caches/c") == ("app", "com.example.a", .caches))
    #expect(classify(app + "/Library/Application Support/db") == ("app", "com.example.a", .applicationSupport))
    #expect(classify(app + "/Library/Other") == ("app", "com.example.a", .library))
    #expect(classify(app + "/tmp/t") == ("app", "com.example.a", .tmp))
    #expect(classify(group + "/shared.db") == ("group", "group.com.example", .root))
    #expect(classify(group + "/Library/Caches/c") == ("group", "group.com.example", .caches))
    #expect(classify(group + "/Library/Preferences/p") == ("group", "group.com.example", .preferences))
    #expect(classify(group + "/Library/Application Support") == ("group", "group.com.example", .library))
    #expect(classify(group + "/tmp/t") == ("group", "group.com.example", .root), "a group has no tmp")
    #expect(classify(group + "/Documents") == ("group", "group.com.example", .root), "a group has no Documents")
  }

  @Test("what programs may create and remove in each place of a device")
  func placeRules() {
    let metadata = DeviceLayout.metadataFileName
    for directory in DeviceLayout.Directory.allCases {
      #expect(!SandboxLayout.allowsNewEntries(in: .device(directory)))
      #expect(!SandboxLayout.allowsRemoval(of: Array("com.example.a".utf8), in: .device(directory)))
    }
    #expect(!SandboxLayout.allowsNewEntries(in: .root))
    #expect(SandboxLayout.allowsNewEntries(in: .groupRoot), "a group's root takes the group's own files")
    #expect(SandboxLayout.allowsNewEntries(in: .groupLibrary))
    #expect(!SandboxLayout.allowsRemoval(of: metadata, in: .groupRoot))
    #expect(!SandboxLayout.allowsRemoval(of: metadata, in: .root))
    #expect(SandboxLayout.allowsRemoval(of: metadata, in: .other), "only a container's own metadata is fixed")
    #expect(!SandboxLayout.allowsRemoval(of: Array("Library".utf8), in: .groupRoot))
    #expect(!SandboxLayout.allowsRemoval(of: Array("Caches".utf8), in: .groupLibrary))
    #expect(SandboxLayout.allowsRemoval(of: Array("Application Support".utf8), in: .groupLibrary))
    #expect(SandboxLayout.allowsRemoval(of: Array("shared.db".utf8), in: .groupRoot))
    let entry = SandboxLayout.entry(named: Array("Library".utf8), in: .groupRoot, isDirectory: true)
    #expect(entry.place == .groupLibrary && entry.isLayout)
    #expect(SandboxLayout.entry(named: metadata, in: .groupRoot, isDirectory: false).isLayout)
    #expect(SandboxLayout.entry(named: Array("x".utf8), in: .device(.appGroups), isDirectory: true).place == .groupRoot)
  }

  @Test("apps come and go with their groups; ids name an app or a group, never both")
  func apps() throws {
    var apps = DeviceApps()
    let (a, b, shared, other) = (
      Self.id("com.example.a"), Self.id("com.example.b"), Self.id("group.shared"), Self.id("group.other")
    )
    #expect(try apps.install(a, groups: [shared, shared]) == [shared])
    #expect(try apps.install(b, groups: [shared, other]) == [other], "only the new group is created")
    #expect(apps.groups == [shared: [a, b], other: [b]])
    #expect(throws: DeviceApps.Refusal.alreadyInstalled(a)) { try apps.install(a, groups: []) }
    #expect(throws: DeviceApps.Refusal.groupIsAnApp(a)) { try apps.install(Self.id("com.example.c"), groups: [a]) }
    #expect(throws: DeviceApps.Refusal.appIsAGroup(shared)) { try apps.install(shared, groups: []) }
    #expect(throws: DeviceApps.Refusal.groupIsTheApp(Self.id("com.example.d"))) {
      try apps.install(Self.id("com.example.d"), groups: [Self.id("com.example.d")])
    }
    let before = apps
    #expect(throws: DeviceApps.Refusal.notInstalled(Self.id("com.example.z"))) {
      try apps.remove(Self.id("com.example.z"))
    }
    #expect(apps == before, "a refusal changes nothing")
    #expect(try apps.remove(b) == [other], "a group goes with its last member")
    #expect(try apps.remove(a) == [shared])
    #expect(apps.apps.isEmpty && apps.groups.isEmpty)
  }

  @Test("one purge order for the whole device: tmp of every container, then every Caches, by urgency and use")
  func deviceWidePurgeOrder() {
    let catalog = PurgeCatalog()
    let (one, two, group) = (ContainerNumber(rawValue: 1), ContainerNumber(rawValue: 2), ContainerNumber(rawValue: 3))
    catalog.containerPaths = [one: [Array("A".utf8)], two: [Array("B".utf8)], group: [Array("G".utf8)]]
    func add(
      _ ino: UInt64, _ domain: StorageDomain, _ container: ContainerNumber, lastUse: UInt32,
      _ urgency: PurgeUrgency = .none
    ) {
      catalog.addFile(
        ino: ino, parent: .root(domain, container: container), name: Array("f\(ino)".utf8), bytes: 10,
        urgency: urgency, lastUse: lastUse)
    }
    add(1, .caches, one, lastUse: 1)  // the oldest file of all, but in Caches
    add(2, .tmp, two, lastUse: 50)
    add(3, .tmp, one, lastUse: 40)
    add(4, .caches, group, lastUse: 5)
    add(5, .caches, two, lastUse: 99, .high)
    add(6, .caches, two, lastUse: 2)
    let order = catalog.chooseVictims(toFree: 1000).map(\.ino)
    #expect(order == [3, 2, 5, 1, 6, 4], "tmp of every app, then Caches by urgency, then least recently used")
    #expect(catalog.chooseVictims(toFree: 15).map(\.container) == [one, two])
    #expect(
      catalog.path(ofFile: 4) == [Array("G".utf8), Array("Library".utf8), Array("Caches".utf8), Array("f4".utf8)])
    #expect(catalog.purgeableBytes(domain: .caches, container: two) == 20)
    catalog.open(ino: 5)
    #expect(catalog.purgeableBytes(domain: .caches, container: two) == 10)
    #expect(!catalog.chooseVictims(toFree: 1000).map(\.ino).contains(5), "never an open file")
    #expect(catalog.removeContainer(two).sorted() == [2, 5, 6])
    #expect(catalog.count == 3 && catalog.purgeableBytes(domain: .caches, container: two) == 0)
    #expect(catalog.purgeableBytes(domain: .caches) == 20 && catalog.purgeableBytes(domain: .tmp) == 10)
  }

  @Test("usage is counted per container and in all")
  func ledgerPerContainer() {
    var ledger = QuotaLedger(capacity: 1000)
    let one = ContainerNumber(rawValue: 1)
    ledger.charge(StorageArea(one, .caches), delta: 100)
    ledger.charge(StorageArea(one, .documents), delta: 50)
    ledger.charge(StorageArea(.root), delta: 8)
    #expect(ledger.used == 158)
    #expect(ledger.usage(of: one) == 150 && ledger.usage(of: .top) == 8)
    #expect(ledger.usage(StorageArea(one, .caches)) == 100 && ledger.usage(.caches) == 100)
    #expect(ledger.usage(StorageArea(ContainerNumber(rawValue: 9), .caches)) == 0)
  }
}
