import FilesystemInterface
import Foundation
import Posix
import PropertyLists
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A device mount through the protocol: its layout, apps coming and going with the books
/// exact, one purge order for every container, the rules programs meet.
@Suite("A device through the protocol")
struct DeviceTests {
  static let kib = 1024
  static let (a, b, shared) = ("com.example.a", "com.example.b", "group.com.example.shared")

  /// A device with two apps sharing a group.
  static func twoApps(capacity: Int64 = 64 << 20) throws -> Sandbox {
    let box = try Sandbox.device(capacity: capacity)
    try box.install(a, groups: [shared])
    try box.install(b, groups: [shared])
    return box
  }

  @Test("a device's root holds Containers, each container its layout and iOS's metadata naming it")
  func layout() throws {
    let box = try Sandbox.device()
    #expect(try box.list("") == ["Containers"])
    #expect(try box.list("Containers") == ["Data", "Shared"])
    #expect(try box.list("Containers/Data/Application").isEmpty)
    #expect(try box.install(Self.a, groups: [Self.shared]) == [Self.shared])
    #expect(try box.list("Containers/Data/Application") == [Self.a])
    #expect(
      try box.list(Sandbox.app(Self.a))
        == [".com.apple.mobile_container_manager.metadata.plist", "Documents", "Library", "tmp"])
    #expect(try box.list(Sandbox.app(Self.a) + "/Library") == ["Application Support", "Caches", "Preferences"])
    #expect(
      try box.list(Sandbox.group(Self.shared)) == [".com.apple.mobile_container_manager.metadata.plist", "Library"])
    #expect(try box.list(Sandbox.group(Self.shared) + "/Library") == ["Caches", "Preferences"])
    for (path, kind) in [(Sandbox.app(Self.a), ContainerKind.app), (Sandbox.group(Self.shared), .group)] {
      let bytes = try Sys.readFile(box.backing + "/" + path + "/.com.apple.mobile_container_manager.metadata.plist")
      let metadata = try ContainerMetadata(decoding: bytes, kind: kind)
      #expect(metadata.identifier.name == path.split(separator: "/").last.map(String.init))
    }
    #expect(
      try box.getxattrText(Sandbox.app(Self.a), "user.appbox.device-state") == "UNLOCKED",
      "a container root reads as a mount's root")
    #expect(try box.getxattrText("", "user.appbox.device-state") == "UNLOCKED")
    try box.expectExactDeviceBooks()
  }

  @Test("a container's metadata round-trips, reads in either format, and is checked against its kind")
  func metadataFormat() throws {
    let app = ContainerMetadata(
      identifier: Sandbox.id("com.example.a"), kind: .app, groups: [Sandbox.id("group.z"), Sandbox.id("group.a")],
      uuid: "4E1B7C2A-0000-4000-8000-000000000001")
    let decoded = try ContainerMetadata(decoding: app.encoded, kind: .app)
    #expect(decoded == app)
    #expect(decoded.groups.map(\.name) == ["group.a", "group.z"])
    let root = try PropertyList(decoding: app.encoded)
    #expect(PropertyList.format(of: app.encoded) == .binary, "written as iOS writes it")
    #expect(root["MCMMetadataIdentifier"]?.stringValue == "com.example.a")
    #expect(root["MCMMetadataContentClass"]?.integerValue == 2)
    #expect(try ContainerMetadata(decoding: root.encoded(as: .xml), kind: .app) == app, "an XML one reads too")
    #expect(throws: ContainerMetadata.Problem.wrongKind(2)) {
      try ContainerMetadata(decoding: app.encoded, kind: .group)
    }
    #expect(throws: (any Error).self) { try ContainerMetadata(decoding: Array("not a plist".utf8), kind: .app) }
    let bad = PropertyList.dictionary([
      ("MCMMetadataIdentifier", .string("../etc")), ("MCMMetadataContentClass", .integer(2)),
    ]).encoded(as: .binary)
    #expect(throws: ContainerMetadata.Problem.badIdentifier) { try ContainerMetadata(decoding: bad, kind: .app) }
    let badGroups = PropertyList.dictionary([
      ("MCMMetadataIdentifier", .string("com.example.a")), ("MCMMetadataContentClass", .integer(2)),
      ("MCMMetadataInfo", .dictionary([(ContainerMetadata.groupsKey, .array([.string("x/../y")]))])),
    ]).encoded(as: .binary)
    #expect(throws: ContainerMetadata.Problem.badGroups) { try ContainerMetadata(decoding: badGroups, kind: .app) }
  }

  @Test("programs cannot make or remove containers or fixed entries (EPERM), nor change metadata")
  func layoutIsFixed() throws {
    let box = try Self.twoApps()
    let app = Sandbox.app(Self.a)
    let group = Sandbox.group(Self.shared)
    #expect(throws: Errno.notPermitted) { _ = try box.mkdir("Containers/Data/Application/com.example.new") }
    #expect(throws: Errno.notPermitted) { _ = try box.mkdir("Containers/Data/Application/x") }
    #expect(throws: Errno.notPermitted) { _ = try box.mkdir("Containers/Other") }
    #expect(throws: Errno.notPermitted) { _ = try box.create("new") }
    #expect(throws: Errno.notPermitted) { try box.rmdir(app) }
    #expect(throws: Errno.notPermitted) { try box.rmdir(group) }
    #expect(throws: Errno.notPermitted) { try box.rename(app, to: "Containers/Data/Application/com.example.c") }
    #expect(throws: Errno.notPermitted) { try box.rmdir("Containers/Data") }
    #expect(throws: Errno.notPermitted) { _ = try box.create(app + "/new") }
    #expect(throws: Errno.notPermitted) { try box.rmdir(app + "/Documents") }
    #expect(throws: Errno.notPermitted) { try box.rmdir(group + "/Library") }
    #expect(throws: Errno.notPermitted) { try box.rmdir(group + "/Library/Caches") }
    let metadata = "/.com.apple.mobile_container_manager.metadata.plist"
    for container in [app, group] {
      #expect(throws: Errno.notPermitted) { try box.unlink(container + metadata) }
      #expect(throws: Errno.notPermitted) { _ = try box.open(container + metadata, flags: O_WRONLY) }
      #expect(throws: Errno.notPermitted) { _ = try box.open(container + metadata, flags: O_RDONLY | O_TRUNC) }
      #expect(throws: Errno.notPermitted) { try box.setxattr(container + metadata, "user.x", "1") }
      let reader = try box.open(container + metadata)
      box.release(reader)
    }
    #expect(throws: Errno.notPermitted) { try box.link(group + metadata, as: group + "/copy") }
    #expect(throws: Errno.notPermitted) { try box.rename(group + metadata, to: group + "/moved") }
    // A group's root and Library take the group's own files.
    try box.makeFile(group + "/shared.db", bytes: 100)
    _ = try box.mkdir(group + "/Library/Application Support")
    try box.expectExactDeviceBooks()
  }

  @Test("nothing renames or links from one container to another (EXDEV), files or directories")
  func crossContainer() throws {
    let box = try Self.twoApps()
    let (a, b, group) = (Sandbox.app(Self.a), Sandbox.app(Self.b), Sandbox.group(Self.shared))
    try box.makeFile(a + "/Documents/f", bytes: 10)
    _ = try box.mkdir(a + "/Documents/d")
    #expect(throws: Errno.crossDevice) { try box.rename(a + "/Documents/f", to: b + "/Documents/f") }
    #expect(throws: Errno.crossDevice) { try box.rename(a + "/Documents/f", to: group + "/f") }
    #expect(throws: Errno.crossDevice) { try box.rename(a + "/Documents/d", to: b + "/tmp/d") }
    #expect(throws: Errno.crossDevice) { try box.rename(a + "/Documents/d", to: group + "/Library/Caches/d") }
    #expect(throws: Errno.crossDevice) { try box.link(a + "/Documents/f", as: b + "/Documents/f") }
    #expect(throws: Errno.crossDevice) { try box.link(a + "/Documents/f", as: group + "/f") }
    #expect(box.backingHas(a + "/Documents/f") && !box.backingHas(b + "/Documents/f"))
    // Within one container, domains still move with one rename.
    try box.rename(a + "/Documents/d", to: a + "/tmp/d")
    try box.rename(a + "/Documents/f", to: a + "/Library/Caches/f")
    try box.expectExactDeviceBooks()
  }

  @Test("a write in any container purges tmp of every app first, then every Caches by urgency and use")
  func deviceWidePurge() throws {
    let box = try Self.twoApps()
    let (a, b, group) = (Sandbox.app(Self.a), Sandbox.app(Self.b), Sandbox.group(Self.shared))
    let size = 64 * Self.kib
    try box.makeFile(a + "/Library/Caches/a-old", bytes: size)
    try box.makeFile(group + "/Library/Caches/g-high", bytes: size)
    try box.setxattr(group + "/Library/Caches/g-high", "user.appbox.purge-urgency", "high")
    try box.makeFile(b + "/Library/Caches/b-new", bytes: size)
    try box.makeFile(a + "/tmp/a-tmp", bytes: size)
    try box.makeFile(b + "/tmp/b-tmp", bytes: size)
    // Older uses for the Caches files, in this order: a-old, then b-new.
    box.fs.storage.books.withLock { books in
      for (path, time) in [(a + "/Library/Caches/a-old", UInt32(100)), (b + "/Library/Caches/b-new", 200)] {
        let st = try! Sys.lstatPath(box.backing + "/" + path)
        _ = books.catalog.touch(ino: UInt64(st.st_ino), at: time)
      }
    }
    _ = box.fs.resize(to: box.used + Int64(8 * Self.kib), reason: .resize)
    let writer = try box.create(b + "/Documents/big")
    defer { box.release(writer) }
    #expect(try box.write(writer, [UInt8](repeating: 1, count: 4 * size)) == 4 * size)
    let purges = box.events("purge")
    let expected = ["a-tmp", "b-tmp", "g-high", "a-old", "b-new"]
    let order = purges.compactMap { line in expected.first { line.contains("/\($0)\"") } }
    #expect(order.count >= 4 && order == Array(expected.prefix(order.count)), "tmp of every app, then Caches: \(order)")
    for line in purges {
      #expect(line.contains("\"requester\":\"\(Self.b)\""), "the writer's container paid for: \(line)")
      let container = line.contains("/a-") ? Self.a : line.contains("/b-") ? Self.b : Self.shared
      #expect(line.contains("\"container\":\"\(container)\""), "names its container: \(line)")
    }
    try box.expectExactDeviceBooks()
  }

  @Test("a file that is open is never purged, in any container")
  func openFilesStay() throws {
    let box = try Self.twoApps()
    let open = try box.create(Sandbox.app(Self.a) + "/tmp/open")
    _ = try box.write(open, [UInt8](repeating: 1, count: 32 * Self.kib))
    try box.makeFile(Sandbox.group(Self.shared) + "/Library/Caches/c", bytes: 32 * Self.kib)
    #expect(box.fs.purge(.bytes(1 << 30)).files == 1)
    #expect(box.backingHas(Sandbox.app(Self.a) + "/tmp/open"))
    box.release(open)
    try box.expectExactDeviceBooks()
  }

  @Test("removing an app removes its container, and a group with its last member, books exact")
  func removeApp() throws {
    let box = try Self.twoApps()
    let (a, b, group) = (Sandbox.app(Self.a), Sandbox.app(Self.b), Sandbox.group(Self.shared))
    for path in [a + "/Documents/doc", a + "/Library/Caches/c", a + "/tmp/t", b + "/Library/Caches/c", group + "/g"] {
      try box.makeFile(path, bytes: 20 * Self.kib)
    }
    _ = try box.mkdir(a + "/Library/Caches/dir")
    try box.makeFile(a + "/Library/Caches/dir/inner", bytes: 5 * Self.kib)
    try box.link(a + "/Documents/doc", as: a + "/Documents/doc-link")
    let open = try box.open(a + "/tmp/t")  // a program's open file does not stop a removal
    _ = try box.lookup(a)  // the kernel holds the container
    let usage = box.containerUsage
    // The open file's blocks stay allocated, and charged, until it is released.
    let held = Int64(try Sys.fstat(Int32(truncatingIfNeeded: open.handle.rawValue)).st_blocks) * 512
    let removed = try box.remove(Self.a)
    #expect(removed.groups.isEmpty, "the group still has a member")
    #expect(removed.files == 6 && removed.bytes + held == usage[Self.a])
    #expect(!box.backingHas(a) && box.backingHas(group + "/g"))
    #expect(try box.list("Containers/Data/Application") == [Self.b])
    #expect(throws: Errno.noEntry) { _ = try box.lookup(a) }
    #expect(box.notifier.names.contains(Self.a), "the kernel forgets the container's name")
    #expect(box.fs.storage.books.withLock { $0.catalog.count } == 1, "b's cache alone is purgeable")
    _ = try box.read(open, count: 10)  // still readable, as an unlinked file
    box.release(open)
    try box.expectExactDeviceBooks()

    let last = try box.remove(Self.b)
    #expect(last.groups == [Self.shared], "the group goes with its last member")
    #expect(
      box.backingTree() == [
        "Containers", "Containers/Data", "Containers/Data/Application", "Containers/Shared",
        "Containers/Shared/AppGroup",
      ])
    #expect(box.fs.storage.books.withLock { $0.catalog.count } == 0)
    try box.expectExactDeviceBooks()
    // The same id installs afresh.
    try box.install(Self.a)
    #expect(try box.list(a + "/Documents").isEmpty)
    try box.expectExactDeviceBooks()
  }

  @Test("bad changes are refused and change nothing")
  func refusals() throws {
    let box = try Self.twoApps()
    let before = box.backingTree()
    let usage = box.containerUsage
    #expect(throws: AppChangeError.self) { try box.install(Self.a) }
    #expect(throws: AppChangeError.self) { try box.install("com.example.c", groups: [Self.a]) }
    #expect(throws: AppChangeError.self) { try box.install(Self.shared) }
    #expect(throws: AppChangeError.self) { try box.remove("com.example.unknown") }
    #expect(throws: AppChangeError.self) { try box.remove(Self.shared) }
    #expect(box.backingTree() == before)
    #expect(box.containerUsage == usage)
    let plain = try Sandbox()
    #expect(throws: AppChangeError.self) { try plain.install(Self.a) }
    #expect(plain.fs.deviceApps == nil)
  }

  @Test("an install that does not fit, even after purging, changes nothing")
  func installWithoutRoom() throws {
    let box = try Sandbox.device(capacity: 1 << 20)
    try box.install(Self.a)
    try box.makeFile(Sandbox.app(Self.a) + "/tmp/t", bytes: 16 * Self.kib)
    let document = try box.create(Sandbox.app(Self.a) + "/Documents/full")
    defer { box.release(document) }
    var offset = 0
    while let written = try? box.write(document, [UInt8](repeating: 1, count: 64 * Self.kib), at: off_t(offset)) {
      offset += written  // until ENOSPC: what was purgeable went first
    }
    #expect(!box.backingHas(Sandbox.app(Self.a) + "/tmp/t"))
    let before = box.backingTree()
    let usage = box.containerUsage
    #expect(throws: AppChangeError.self) { try box.install(Self.b, groups: [Self.shared]) }
    #expect(box.backingTree() == before)
    #expect(box.containerUsage == usage)
    #expect(box.fs.deviceApps?.apps.count == 1)
    #expect(throws: Errno.noEntry) { _ = try box.lookup(Sandbox.app(Self.b)) }
    try box.expectExactDeviceBooks()
  }

  @Test("a removal racing writes that purge the removed app's cache keeps the books exact")
  func removalRacingPurges() throws {
    let box = try Self.twoApps(capacity: 8 << 20)
    for index in 0..<200 { try box.makeFile(Sandbox.app(Self.a) + "/Library/Caches/c\(index)", bytes: 16 * Self.kib) }
    for index in 0..<50 { try box.makeFile(Sandbox.app(Self.b) + "/Library/Caches/c\(index)", bytes: 16 * Self.kib) }
    _ = box.fs.resize(to: box.used + Int64(64 * Self.kib), reason: .resize)
    nonisolated(unsafe) let racing = box
    let finished = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      for index in 0..<40 {
        // ENOSPC once everything purgeable is gone.
        try? racing.makeFile(Sandbox.app(Self.b) + "/Documents/d\(index)", bytes: 32 * Self.kib)
      }
      finished.signal()
    }
    _ = try box.remove(Self.a)
    finished.wait()
    #expect(!box.backingHas(Sandbox.app(Self.a)))
    try box.expectExactDeviceBooks()
  }

  @Test("the apps, their groups and their data survive a remount; the backing tree is the record")
  func remount() throws {
    let box = try Self.twoApps()
    try box.install("com.example.c", groups: ["group.com.example.other"])
    try box.makeFile(Sandbox.app(Self.a) + "/Documents/kept", bytes: 100)
    let again = try SandboxFilesystem(
      backingDirectory: box.backing, configuration: CacheTimeouts(), options: box.options, driver: InMemoryDriver())
    let apps = try #require(again.deviceApps)
    #expect(apps == box.fs.deviceApps)
    #expect(
      apps.groups.mapValues { $0.map(\.name) } == [
        Sandbox.id(Self.shared): [Self.a, Self.b], Sandbox.id("group.com.example.other"): ["com.example.c"],
      ])
    #expect(Sandbox.containerUsage(of: again) == box.containerUsage)
  }

  @Test("a removal or install a crash interrupted is finished at mount; groups follow their apps")
  func interrupted() throws {
    let box = try Self.twoApps()
    let groups = box.backing + "/Containers/Shared/AppGroup"
    let apps = box.backing + "/Containers/Data/Application"
    // A removal renamed the app away and crashed; an install staged a container.
    try Sys.rename(apps + "/" + Self.b, to: apps + "/.appbox-removing-9-" + Self.b)
    try Sys.mkdir(apps + "/.appbox-installing-com.example.c", 0o755)
    // A group no app names (its last member went), and one an app names that is missing.
    try Sys.mkdir(groups + "/group.orphan", 0o755)
    try Sys.replaceFile(
      groups + "/group.orphan/.com.apple.mobile_container_manager.metadata.plist",
      with: ContainerMetadata(identifier: Sandbox.id("group.orphan"), kind: .group, uuid: "x").encoded, mode: 0o644)
    TestFiles.removeTree(groups + "/" + Self.shared)
    let again = try SandboxFilesystem(
      backingDirectory: box.backing, configuration: CacheTimeouts(), options: box.options, driver: InMemoryDriver())
    #expect(again.deviceApps?.apps.keys.map(\.name) == [Self.a])
    #expect(TestFiles.entries(of: apps) == [Self.a])
    #expect(TestFiles.entries(of: groups) == [Self.shared], "the orphan goes, the missing group is made")
    #expect(TestFiles.entries(of: groups + "/" + Self.shared + "/Library").sorted() == ["Caches", "Preferences"])
  }

  @Test("a backing tree that is not a consistent device, or the wrong kind, is refused at mount, unchanged")
  func badBacking() throws {
    let plain = try Sandbox()
    let deviceOptions = { () -> SandboxOptions in
      var options = plain.options
      options.device = true
      return options
    }()
    #expect(throws: SandboxSetupError.system(.invalidArgument)) {
      _ = try SandboxFilesystem(
        backingDirectory: plain.backing, configuration: CacheTimeouts(), options: deviceOptions,
        driver: InMemoryDriver())
    }
    #expect(throws: DeviceBacking.Problem.self) { try DeviceBacking.check(plain.backing, device: true) }
    let box = try Self.twoApps()
    #expect(throws: SandboxSetupError.system(.invalidArgument)) {
      _ = try SandboxFilesystem(
        backingDirectory: box.backing, configuration: CacheTimeouts(), options: plain.options,
        driver: InMemoryDriver())
    }
    let apps = box.backing + "/Containers/Data/Application"
    for (make, undo) in [
      ({ try Sys.mkdir(apps + "/not_an_id", 0o755) }, { TestFiles.removeTree(apps + "/not_an_id") }),
      ({ try Sys.mkdir(apps + "/com.example.nometa", 0o755) }, { TestFiles.removeTree(apps + "/com.example.nometa") }),
      (
        {
          try Sys.replaceFile(
            apps + "/" + Self.a + "/.com.apple.mobile_container_manager.metadata.plist",
            with: ContainerMetadata(identifier: Sandbox.id(Self.b), kind: .app, uuid: "x").encoded, mode: 0o644)
        },
        {
          try Sys.replaceFile(
            apps + "/" + Self.a + "/.com.apple.mobile_container_manager.metadata.plist",
            with: ContainerMetadata(
              identifier: Sandbox.id(Self.a), kind: .app, groups: [Sandbox.id(Self.shared)], uuid: "x"
            ).encoded, mode: 0o644)
        }
      ),
    ] as [(() throws -> Void, () throws -> Void)] {
      try make()
      let before = box.backingTree()
      #expect(throws: DeviceBacking.Problem.self) { try DeviceBacking.check(box.backing, device: true) }
      #expect(throws: SandboxSetupError.system(.invalidArgument)) {
        _ = try SandboxFilesystem(
          backingDirectory: box.backing, configuration: CacheTimeouts(), options: box.options,
          driver: InMemoryDriver())
      }
      #expect(box.backingTree() == before, "a refused mount changes nothing")
      try undo()
    }
    try DeviceBacking.check(box.backing, device: true)
  }

  @Test("AppBox's staging names are never seen on the mount")
  func stagingHidden() throws {
    let box = try Self.twoApps()
    try Sys.mkdir(box.backing + "/Containers/Data/Application/.appbox-removing-1-com.example.x", 0o755)
    #expect(try box.list("Containers/Data/Application") == [Self.a, Self.b])
    #expect(throws: Errno.noEntry) {
      _ = try box.lookup("Containers/Data/Application/.appbox-removing-1-com.example.x")
    }
  }

  @Test("one lock state for every container; refusals name the container")
  func oneLock() throws {
    let box = try Self.twoApps()
    let paths = [Sandbox.app(Self.a) + "/Documents/secret", Sandbox.group(Self.shared) + "/secret"]
    for path in paths {
      try box.makeFile(path, bytes: 10)
      try box.setxattr(path, "user.appbox.protection", "complete")
    }
    _ = box.fs.lock()
    #expect(box.fs.deviceState == .locked)
    for path in paths {
      #expect(throws: Errno.notPermitted) { _ = try box.open(path) }
    }
    let refusals = box.events("refusal")
    #expect(refusals.count == 2)
    #expect(refusals.first?.contains("\"container\":\"\(Self.a)\"") == true)
    #expect(refusals.last?.contains("\"container\":\"\(Self.shared)\"") == true)
    #expect(refusals.first?.contains("\"path\":\"\(paths[0])\"") == true)
  }

  @Test("status shows every container's usage; usage samples name the containers")
  func status() throws {
    let box = try Self.twoApps()
    try box.makeFile(Sandbox.app(Self.a) + "/Library/Caches/c", bytes: 40 * Self.kib)
    let status = box.fs.statusJSON()
    #expect(status.contains("\"device\":true"))
    #expect(status.contains("\"id\":\"\(Self.a)\",\"kind\":\"app\",\"groups\":[\"\(Self.shared)\"]"))
    #expect(status.contains("\"id\":\"\(Self.shared)\",\"kind\":\"group\",\"members\":[\"\(Self.a)\",\"\(Self.b)\"]"))
    #expect(status.contains("\"used\":\(box.containerUsage[Self.a]!)"))
    box.fs.unmounted()
    let lines = box.events("containerUsage").filter { $0.contains("\"reason\":\"unmount\"") }
    #expect(lines.count == 3, "every container at unmount: \(lines)")
    let line = try #require(lines.first { $0.contains("\"container\":\"\(Self.a)\"") })
    #expect(line.contains("\"kind\":\"app\",\"used\":\(box.containerUsage[Self.a]!)"), "\(line)")
    #expect(line.contains("\"caches\":"), "\(line)")
    #expect(!(try Sandbox()).fs.statusJSON().contains("\"device\""), "a plain mount's status is as before")
  }
}
