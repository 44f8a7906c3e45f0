import Dispatch
import FilesystemInterface
import Foundation
import Posix
import SandboxPolicy
import Synchronization
import TestSupport
import Testing

@testable import AppBoxFS

/// Failures reported by worker threads.
final class Failures: Sendable {
  private let list = Mutex<[String]>([])
  func add(_ failures: [String]) { list.withLock { $0 += failures } }
  var all: [String] { list.withLock { $0 } }
}

/// Requests from many threads at once, as the kernel sends them from many processes:
/// opens, writes, renames and lock changes racing purges. Each runs for about a second
/// and ends with the books exact. (The time limit is the mount tests': a test's time
/// counts from when it is scheduled, and in the whole suite on two CPUs long mount tests
/// can hold both of Swift Testing's threads for a minute or two before it runs.)
@Suite("Concurrent requests through the protocol", .timeLimit(.minutes(10)))
struct ConcurrencyTests {
  /// Runs each worker on a thread of its own until `seconds` have passed; their failures.
  static func run(seconds: Double, _ workers: [@Sendable (Double) -> [String]]) -> [String] {
    let deadline = Clock.monotonic() + seconds
    let failures = Failures()
    let group = DispatchGroup()
    for work in workers {
      group.enter()
      Thread.detachNewThread {
        defer { group.leave() }
        failures.add(work(deadline))
      }
    }
    group.wait()
    return failures.all
  }

  /// A worker that writes new Caches files of `size` bytes until the deadline, forcing
  /// purges in a small sandbox.
  static func filler(_ box: Sandbox, _ index: Int, size: Int = 128 << 10) -> @Sendable (Double) -> [String] {
    { deadline in
      var failures: [String] = []
      var serial = 0
      while Clock.monotonic() < deadline {
        serial += 1
        do throws(Errno) {
          try box.writeFile("Library/Caches/fill-\(index)-\(serial)", pattern(size, seed: UInt64(serial)))
        } catch  where error == .noSpace {
        } catch {
          failures.append("fill \(index)-\(serial): \(error)")
        }
      }
      return failures
    }
  }

  @Test("re-openers, fillers and purges at once: no file is purged while a handle holds it; books exact")
  func openFilesAreNeverPurged() throws {
    let box = try Sandbox(capacity: 4 << 20)
    let reopeners: [@Sendable (Double) -> [String]] = (0..<6).map { index in
      { deadline in
        var failures: [String] = []
        var reopens = 0
        let path = "Library/Caches/h\(index)"
        while Clock.monotonic() < deadline {
          let file: (node: NodeID, handle: FilesystemInterface.FileHandle)
          do throws(Errno) { file = try box.create(path, flags: O_RDWR | O_APPEND) } catch {
            if error != .noSpace { failures.append("create \(path): \(error)") }
            continue
          }
          reopens += 1
          do throws(Errno) {
            _ = try box.write(file, pattern(4096, seed: UInt64(reopens)))
          } catch  where error == .noSpace {
          } catch {
            failures.append("write \(path): \(error)")
          }
          let held = try? box.fs.getattr(Sandbox.root, node: file.node, handle: file.handle)
          let named = try? box.backingStat(path)  // nil: the name is gone, which must not be
          if held == nil || named?.st_ino != held?.st_ino { failures.append("\(path) purged while open") }
          box.release(file)
        }
        if reopens < 5 { failures.append("re-opener \(index) ran \(reopens) times") }
        return failures
      }
    }
    let purger: @Sendable (Double) -> [String] = { deadline in
      while Clock.monotonic() < deadline { _ = box.fs.purge(.domain(.caches)) }
      return []
    }
    let failures = Self.run(seconds: 1.5, reopeners + (0..<2).map { Self.filler(box, $0) } + [purger])
    #expect(failures.isEmpty, "\(failures.prefix(10)) (\(failures.count) in all)")
    #expect(box.used <= 4 << 20)
    try box.expectExactBooks()
  }

  @Test(
    "renames of directories in and out of Caches and tmp while fillers force purges: no Documents file lost, books exact"
  )
  func movesUnderPurges() throws {
    let box = try Sandbox(capacity: 8 << 20)
    let movers: [@Sendable (Double) -> [String]] = (0..<4).map { index in
      { deadline in Self.mover(box, index: index, purgeable: index % 2 == 0 ? "Library/Caches" : "tmp", until: deadline)
      }
    }
    let purger: @Sendable (Double) -> [String] = { deadline in
      while Clock.monotonic() < deadline { _ = box.fs.purge(.bytes(512 << 10)) }
      return []
    }
    let failures = Self.run(seconds: 2, movers + (0..<3).map { Self.filler(box, $0) } + [purger])
    #expect(failures.isEmpty, "\(failures.prefix(10)) (\(failures.count) in all)")
    #expect(box.purgedPaths().contains { $0.contains("/m") }, "purges took files from the movers' directories too")
    // Every node is in the domain its file is (or was last, if purged) in.
    for inode in box.fs.inodes.snapshot() {
      let path = String(decoding: box.fs.mountPath(of: inode), as: UTF8.self)
      let place: StorageDomain? =
        path.hasPrefix("Documents/")
        ? .documents
        : path.hasPrefix("Library/Caches/") ? .caches : path.hasPrefix("tmp/") ? .tmp : nil
      if let place { #expect(inode.domain == place, "\(path)") }
    }
    try box.expectExactBooks()
    let again = try box.remount()
    #expect(again.usage == box.usage && again.tracked == box.tracked)
  }

  static let filesPerRound = 16
  static let fileSize = 8192
  /// Moves each mover must make (into Documents and out count one each).
  static let minimumMoves = 4

  /// Moves its own directory `mN` between `purgeable` and Documents until `deadline`,
  /// refilling it while it is purgeable. Every file listed right after a move into
  /// Documents must still be there, with its contents, when it moves out again.
  static func mover(_ box: Sandbox, index: Int, purgeable: String, until deadline: Double) -> [String] {
    var failures: [String] = []
    let purgeablePath = "\(purgeable)/m\(index)"
    let documentsPath = "Documents/m\(index)"
    do throws(Errno) { try box.mkdir(purgeablePath) } catch { return ["mkdir \(purgeablePath): \(error)"] }
    var serial = 0
    var moves = 0
    // A loaded machine may not get through the moves before the deadline: the last ones
    // then run after the fillers and the purger have stopped (within 30 s more).
    while Clock.monotonic() < deadline || (moves < Self.minimumMoves && Clock.monotonic() < deadline + 30) {
      for _ in 0..<Self.filesPerRound {
        serial += 1
        do throws(Errno) {
          try box.writeFile("\(purgeablePath)/f\(serial)", pattern(Self.fileSize, seed: UInt64(serial)))
        } catch  where error == .noSpace || error == .stale {
        } catch {
          failures.append("write \(purgeablePath)/f\(serial): \(error)")
        }
      }
      do throws(Errno) { try box.rename(purgeablePath, to: documentsPath) } catch {
        failures.append("rename into Documents: \(error)")
        break
      }
      moves += 1
      let kept = ((try? box.list(documentsPath)) ?? []).filter {  // nil: listed below as a failure
        (try? box.backingStat(documentsPath + "/" + $0))?.st_size == Self.fileSize
      }
      usleep(UInt32.random(in: 0..<2_000))  // widens the window for a purge that chose a file before the move
      for name in kept
      where (try? box.backingContents(documentsPath + "/" + name))
        != pattern(Self.fileSize, seed: UInt64(name.dropFirst()) ?? 0)
      {
        failures.append("\(documentsPath)/\(name) lost or changed after its directory left \(purgeable)")
      }
      do throws(Errno) { try box.rename(documentsPath, to: purgeablePath) } catch {
        failures.append("rename out of Documents: \(error)")
        break
      }
      moves += 1
    }
    if moves < Self.minimumMoves { failures.append("mover \(index) moved only \(moves) times") }
    return failures
  }

  @Test("unlinks and renames out of Caches racing purges: each file leaves the books once, a renamed one is kept")
  func unlinksAndRenamesRacingPurges() throws {
    let box = try Sandbox(capacity: 16 << 20)
    try box.mkdir("Documents/kept")
    let workers: [@Sendable (Double) -> [String]] = (0..<4).map { index in
      { deadline in
        var failures: [String] = []
        var serial = 0
        while Clock.monotonic() < deadline {
          serial += 1
          let path = "Library/Caches/w\(index)-\(serial)"
          do throws(Errno) {
            try box.writeFile(path, pattern(16_384, seed: UInt64(serial)))
            if serial % 2 == 0 {
              try box.rename(path, to: "Documents/kept/w\(index)-\(serial)")
              if (try? box.backingContents("Documents/kept/w\(index)-\(serial)"))
                != pattern(16_384, seed: UInt64(serial))
              {
                failures.append("Documents/kept/w\(index)-\(serial) lost after its rename")
              }
            } else {
              try box.unlink(path)
            }
          } catch  where error == .noEntry || error == .noSpace {
            // A purge took it first: allowed while it was in Caches.
          } catch {
            failures.append("\(path): \(error)")
          }
        }
        return failures
      }
    }
    let purger: @Sendable (Double) -> [String] = { deadline in
      while Clock.monotonic() < deadline { _ = box.fs.purge(.domain(.caches)) }
      return []
    }
    let failures = Self.run(seconds: 1.5, workers + [purger])
    #expect(failures.isEmpty, "\(failures.prefix(10)) (\(failures.count) in all)")
    try box.expectExactBooks()
  }

  @Test("lock changes racing opens: class C always opens, class A opens or is refused with EPERM, nothing else")
  func lockChangesRacingOpens() throws {
    let box = try Sandbox()
    try box.mkdir("Documents/a")
    try box.protect("Documents/a", "complete")
    for index in 0..<4 {
      try box.writeFile("Documents/a/f\(index)", pattern(4096))
      try box.writeFile("Documents/c\(index)", pattern(4096))
    }
    let openers: [@Sendable (Double) -> [String]] = (0..<4).map { index in
      { deadline in
        var failures: [String] = []
        var refused = 0
        while Clock.monotonic() < deadline {
          do throws(Errno) { box.release(try box.open("Documents/c\(index)")) } catch {
            failures.append("class C refused: \(error)")
          }
          do throws(Errno) {
            let file = try box.open("Documents/a/f\(index)")
            _ = try? box.read(file, count: 10)  // refused if a lock came in between: allowed
            box.release(file)
          } catch  where error == .notPermitted {
            refused += 1
          } catch {
            failures.append("class A: \(error)")
          }
        }
        return failures
      }
    }
    let locker: @Sendable (Double) -> [String] = { deadline in
      var changes = 0
      while Clock.monotonic() < deadline {
        _ = box.fs.lock()
        _ = box.fs.unlock()
        changes += 2
      }
      return changes < 10 ? ["only \(changes) lock changes"] : []
    }
    let failures = Self.run(seconds: 1, openers + [locker])
    #expect(failures.isEmpty, "\(failures.prefix(10)) (\(failures.count) in all)")
    #expect(box.fs.protection.counters.withLock { $0.refusals(for: .completeUntilFirstUserAuthentication) } == 0)
    try box.expectExactBooks()
  }

  @Test("writers filling a small sandbox at once never take it above its capacity; books exact")
  func fillersStayWithinCapacity() throws {
    let box = try Sandbox(capacity: 2 << 20)
    let writers: [@Sendable (Double) -> [String]] = (0..<4).map { index in
      { deadline in
        var failures: [String] = []
        let path = "Documents/big\(index)"
        var offset = 0
        // A writer that starts late may find the sandbox full: its create's ENOSPC is the
        // rule working, so it tries again while the others give room back.
        var created: (node: NodeID, handle: FilesystemInterface.FileHandle)?
        while created == nil && Clock.monotonic() < deadline {
          do throws(Errno) { created = try box.create(path) } catch where error == .noSpace {
            Clock.sleep(seconds: 0.001)
          } catch { return ["create \(path): \(error)"] }
        }
        guard let file = created else { return [] }
        while Clock.monotonic() < deadline && offset < 4 << 20 {
          do throws(Errno) {
            offset += try box.write(file, pattern(64 << 10), at: off_t(offset))
          } catch  where error == .noSpace {
            _ = try? box.truncate(file, to: 0)  // gives it back for the others
            offset = 0
          } catch {
            failures.append("write \(path): \(error)")
            break
          }
          if box.used > 2 << 20 { failures.append("used \(box.used) above the capacity") }
        }
        box.release(file)
        return failures
      }
    }
    let failures = Self.run(seconds: 1, writers + (0..<2).map { Self.filler(box, $0, size: 64 << 10) })
    #expect(failures.isEmpty, "\(failures.prefix(10)) (\(failures.count) in all)")
    try box.expectExactBooks()
    #expect(Sandbox.diskUsage(box.backing) <= 2 << 20)
  }

  @Test("a number freed by an unlink and taken by another thread's new directory before the unlink is on the books")
  func numberReusedBeforeItsRemovalIsBooked() throws {
    let box = try Sandbox()
    let tmp = try box.lookup("tmp")
    guard case .held(let directory) = box.fs.inodes.resolve(tmp) else { throw Errno.stale }
    var reused = 0
    var rounds = 0
    for round in 0..<200 where reused < 3 {
      rounds += 1
      try box.writeFile("tmp/f\(round)", [1])
      let node = try box.lookup("tmp/f\(round)")
      box.fs.forget(node, count: box.lookups(node))  // the kernel forgot it: nothing holds the number
      // The unlink's steps on one thread, another thread's mkdir between its system call
      // and its books (the order a loaded machine may run them in).
      let st = try box.backingStat("tmp/f\(round)")
      let held = box.fs.inodes.existing(backingInode: UInt64(st.st_ino))
      try Sys.unlink(box.backing + "/tmp/f\(round)")
      try box.mkdir("tmp/d\(round)")
      if try box.backingStat("tmp/d\(round)").st_ino == st.st_ino { reused += 1 }
      FileName.withBytes(bytes("f\(round)")) { name in box.fs.untrack(st, name: name, in: directory, held: held) }
      try box.writeFile("tmp/d\(round)/inside", [1])
    }
    // ext4 gives a freed number to a new directory about one time in four; a filesystem
    // that never reuses numbers (tmpfs) cannot show the race.
    print("numberReusedBeforeItsRemovalIsBooked: \(reused) of \(rounds) directories took a freed file's number")
    try box.expectExactBooks()
    #expect(box.fs.purge(.domain(.tmp)).files == rounds, "every new directory's file is purgeable")
  }
}
