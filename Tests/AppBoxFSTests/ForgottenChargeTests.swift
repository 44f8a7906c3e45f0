import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// What the books hold for a file the kernel forgot. The backing filesystem may allocate
/// for a file after its last measurement (ext4 adds an extent-tree block when it writes a
/// fragmented file back, seconds later); here the file grows behind the daemon instead.
/// The books hold the charge of that last measurement, so a node made for the file again
/// starts from it, and a purge of a file no node holds gives back what the books hold,
/// not what the file has allocated by then (docs/architecture.md, Quota).
@Suite("Charges of forgotten files")
struct ForgottenChargeTests {
  /// Creates `path` with 8 KiB, drops its node (the kernel forgets it), and grows the
  /// backing file behind the daemon by 64 KiB.
  static func forgottenAndGrown(_ box: Sandbox, _ path: String) throws -> NodeID {
    try box.makeFile(path, bytes: 8192)
    let node = try box.lookup(path)
    box.fs.forget(node, count: box.lookups(node))
    let fd = try Sys.open(box.backing + "/" + path, O_WRONLY | O_APPEND | O_CLOEXEC)
    defer { Sys.close(fd) }
    _ = try [UInt8](repeating: 0x62, count: 65536).withUnsafeBytes { try Sys.write(fd, $0) }
    return node
  }

  @Test("a node made again for a forgotten file starts from the books' charge: its next measurement charges the growth")
  func nodeTakenAgain() throws {
    let box = try Sandbox()
    let node = try Self.forgottenAndGrown(box, "Documents/a")
    guard case .retained = box.fs.inodes.resolve(node) else {
      Issue.record("the forgotten node was not retained")
      return
    }
    let again = try box.lookup("Documents/a")
    #expect(again == node, "the same node again")
    box.fs.forget(again, count: box.lookups(again))  // measured once more
    try box.expectExactBooks()
  }

  @Test("a purge of a file no node holds gives back what the books hold for it")
  func uncachedVictim() throws {
    let box = try Sandbox()
    _ = try Self.forgottenAndGrown(box, "Library/Caches/a")
    #expect(box.fs.purge(.domain(.caches)).files == 1)
    try box.expectExactBooks()
  }
}
