import FilesystemInterface
import Foundation
import Posix
import SandboxPolicy
import Synchronization
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// A device's record and ids against hostile input (docs/reference.md#a-device): the
/// longest ids a device takes, what a backing directory's owner can plant where a
/// container's metadata file belongs, and a program writing on through a handle whose
/// file lost its name (unlinked, or in a removed app's container), which the quota holds.
@Suite("A device against hostile input")
struct DeviceHostileInputTests {
  static let metadataName = ".com.apple.mobile_container_manager.metadata.plist"

  @Test("the longest id an install takes is removed however many removals came before, app and group")
  func longestIdsInstallAndRemove() throws {
    let box = try Sandbox.device()
    let app = "com." + String(repeating: "a", count: ContainerIdentifier.maximumLength - 4)
    let group = "group." + String(repeating: "g", count: ContainerIdentifier.maximumLength - 6)
    #expect(try box.install(app, groups: [group]) == [group])
    // Removals so far are numbered in the staging names: the largest number there is.
    box.fs.removals.store(UInt64.max - 1, ordering: .relaxed)
    let removed = try box.remove(app)
    #expect(removed.groups == [group])
    #expect(
      box.backingTree() == [
        "Containers", "Containers/Data", "Containers/Data/Application", "Containers/Shared",
        "Containers/Shared/AppGroup",
      ])
    try box.expectExactDeviceBooks()
  }

  @Test("a metadata file that is a FIFO, a directory or a symlink refuses the mount at once, unchanged")
  func plantedMetadata() throws {
    let box = try Sandbox.device()
    try box.install("com.example.a")
    let path = box.backing + "/Containers/Data/Application/com.example.a/" + Self.metadataName
    let saved = try Sys.readFile(path)
    try Sys.unlink(path)
    defer { try? Sys.replaceFile(path, with: saved, mode: 0o644) }  // absent: the test's own clean-up

    for (kind, make) in [
      ("FIFO", { #expect(mkfifo(path, 0o644) == 0) }),
      ("directory", { try Sys.mkdir(path, 0o755) }),
      ("symlink", { #expect(symlink("/etc/passwd", path) == 0) }),
    ] as [(String, () throws -> Void)] {
      try make()
      let before = box.backingTree()
      let problem = try Self.withoutHanging(on: path) { () throws(DeviceBacking.Problem) in
        try DeviceBacking.check(box.backing, device: true)
      }
      #expect(problem != nil, "\(kind): refused")
      #expect(problem?.description.contains("com.example.a") == true, "\(kind): \(problem?.description ?? "")")
      let rootFD = try Sys.open(box.backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      defer { Sys.close(rootFD) }
      let apps = try Self.withoutHanging(on: path) { () throws(DeviceBacking.Problem) in
        _ = try DeviceBacking.apps(rootFD: rootFD)  // what a backup reads
      }
      #expect(apps != nil, "\(kind): a backup's read is refused too")
      #expect(box.backingTree() == before, "\(kind): a refused mount changes nothing")
      TestFiles.removeTree(path)
    }
  }

  /// Runs `body` on a thread of its own and returns its ``DeviceBacking/Problem`` (nil when it
  /// succeeded). When it has not returned within a minute it is blocked (in the open of
  /// the FIFO at `path`): a writer's open then lets it go on, and the test fails.
  static func withoutHanging(on path: String, _ body: @escaping @Sendable () throws(DeviceBacking.Problem) -> Void)
    throws -> DeviceBacking.Problem?
  {
    let result = Mutex<Result<Void, DeviceBacking.Problem>?>(nil)
    let thread = Thread {
      let outcome = Result { () throws(DeviceBacking.Problem) in try body() }
      result.withLock { $0 = outcome }
    }
    thread.start()
    let deadline = Clock.monotonic() + 60
    while result.withLock({ $0 }) == nil && Clock.monotonic() < deadline { Clock.sleep(seconds: 0.01) }
    if result.withLock({ $0 }) == nil {
      Issue.record("blocked reading \(path)")
      while result.withLock({ $0 }) == nil {
        let fd = open(path, O_WRONLY | O_NONBLOCK)  // a reader blocked in open returns now
        if fd >= 0 { close(fd) }
        Clock.sleep(seconds: 0.05)
      }
    }
    switch result.withLock({ $0 })! {
    case .success: return nil
    case .failure(let problem): return problem
    }
  }
}

extension DeviceHostileInputTests {
  @Test(
    "a program's file left open in a removed app's container keeps to the capacity, and the books are exact after it")
  func writerInRemovedContainer() throws {
    let box = try Sandbox.device(capacity: 8 << 20)
    try box.install("com.example.a")
    try box.install("com.example.b")
    let file = try box.create(Sandbox.app("com.example.a") + "/Documents/kept")
    _ = try box.remove("com.example.a")
    var written = 0
    var refused: Errno?
    let chunk = [UInt8](repeating: 0x62, count: 1 << 20)
    while written < 32 << 20 {
      do throws(Errno) {
        let count = try box.write(file, chunk, at: off_t(written))
        if count == 0 { break }
        written += count
      } catch {
        refused = error
        break
      }
    }
    #expect(refused == .noSpace, "written \(written) bytes into a capacity of 8 MiB")
    #expect(written <= 8 << 20)
    box.release(file)
    box.fs.forget(file.node, count: box.lookups(file.node))
    try box.expectExactDeviceBooks()
  }
}

extension DeviceHostileInputTests {
  @Test("an unlinked file held open keeps to the capacity on a plain mount")
  func unlinkedWriterPlain() throws {
    let box = try Sandbox(capacity: 8 << 20)
    let file = try box.create("Documents/kept")
    try box.unlink("Documents/kept")
    var written = 0
    var refused: Errno?
    let chunk = [UInt8](repeating: 0x62, count: 1 << 20)
    while written < 32 << 20 {
      do throws(Errno) {
        let count = try box.write(file, chunk, at: off_t(written))
        if count == 0 { break }
        written += count
      } catch {
        refused = error
        break
      }
    }
    #expect(refused == .noSpace, "written \(written) bytes into a capacity of 8 MiB")
    box.release(file)
  }
}
