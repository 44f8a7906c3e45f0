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
  /// Writes 1 MiB chunks through `file` up to 32 MiB, until a write fails or stores nothing.
  /// - Returns: the bytes written, and the error that stopped it.
  static func fill(_ file: (node: NodeID, handle: FilesystemInterface.FileHandle), in box: Sandbox) -> (
    written: Int, refused: Errno?
  ) {
    var written = 0
    let chunk = [UInt8](repeating: 0x62, count: 1 << 20)
    while written < 32 << 20 {
      do throws(Errno) {
        let count = try box.write(file, chunk, at: off_t(written))
        if count == 0 { break }
        written += count
      } catch {
        return (written, error)
      }
    }
    return (written, nil)
  }

  @Test(
    "a program's file left open in a removed app's container keeps to the capacity, and the books are exact after it")
  func writerInRemovedContainer() throws {
    let box = try Sandbox.device(capacity: 8 << 20)
    try box.install("com.example.a")
    try box.install("com.example.b")
    let file = try box.create(Sandbox.app("com.example.a") + "/Documents/kept")
    _ = try box.remove("com.example.a")
    let (written, refused) = Self.fill(file, in: box)
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
    let (written, refused) = Self.fill(file, in: box)
    #expect(refused == .noSpace, "written \(written) bytes into a capacity of 8 MiB")
    box.release(file)
  }
}

extension DeviceHostileInputTests {
  /// Whether directories on the test's backing filesystem take more blocks as names are
  /// added (ext4 does; tmpfs directories take none, and there renames cannot grow anything).
  static let backingGrowsDirectories: Bool = {
    var template = Array("/tmp/appboxfs-dirgrowth.XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { return false }
    let path = String(cString: made)
    defer { TestFiles.removeTree(path) }
    let before = (try? Sys.lstatPath(path).st_blocks) ?? 0  // absent: no growth seen
    for index in 0..<200 {
      close(open(path + "/\(index)-" + String(repeating: "x", count: 200), O_CREAT | O_WRONLY, 0o644))
    }
    return ((try? Sys.lstatPath(path).st_blocks) ?? 0) > before
  }()

  @Test(
    "renames alone cannot grow directories past the capacity: to a new name, refused (ENOSPC) once it is exceeded",
    .enabled(if: backingGrowsDirectories, "the backing filesystem's directories take no blocks (tmpfs)"))
  func renamesGrowingDirectories() throws {
    let capacity: Int64 = 1 << 20
    let box = try Sandbox(capacity: capacity)
    _ = try box.mkdir("Documents/d0")
    let names = (0..<1200).map { "f\($0)-" + String(repeating: "x", count: 200) }
    for name in names { box.release(try box.create("Documents/d0/" + name)) }
    var refused: Errno?
    var directory = 0
    rounds: while directory < 12 {
      let next = "Documents/d\(directory + 1)"
      do throws(Errno) { _ = try box.mkdir(next) } catch {
        refused = error
        break
      }
      for name in names {
        do throws(Errno) { try box.rename("Documents/d\(directory)/" + name, to: next + "/" + name) } catch {
          refused = error
          break rounds
        }
      }
      directory += 1
    }
    #expect(refused == .noSpace, "\(directory) rounds of renames, used \(box.used) of \(capacity)")
    #expect(box.used <= capacity + 64 << 10, "at most a few blocks over: \(box.used)")
    try box.expectExactBooks()
  }
}
