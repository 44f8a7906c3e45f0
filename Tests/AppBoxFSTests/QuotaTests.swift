import FilesystemInterface
import Posix
import SandboxPolicy
import Testing

@testable import AppBoxFS

#if canImport(Glibc)
  import Glibc
#endif

/// Reservations, purges and ENOSPC, with the books checked against the backing tree.
@Suite("Quota through the protocol")
struct QuotaTests {
  static let kib = 1024

  @Test("a write that needs room purges tmp first, then Caches, then fails with ENOSPC")
  func purgeOrder() throws {
    let box = try Sandbox()
    try box.makeFile("tmp/t", bytes: 256 * Self.kib)
    try box.makeFile("Library/Caches/c", bytes: 256 * Self.kib)
    // Little room left: the next writes need what tmp and Caches hold.
    _ = box.fs.resize(to: box.used + Int64(160 * Self.kib), reason: .resize)
    #expect(box.backingHas("tmp/t") && box.backingHas("Library/Caches/c"))

    let document = try box.create("Documents/d")
    defer { box.release(document) }
    #expect(try box.write(document, [UInt8](repeating: 1, count: 200 * Self.kib)) == 200 * Self.kib)
    #expect(!box.backingHas("tmp/t"), "tmp goes first")
    #expect(box.backingHas("Library/Caches/c"), "Caches stays while tmp was enough")

    let offset = off_t(200 * Self.kib)
    #expect(try box.write(document, [UInt8](repeating: 2, count: 300 * Self.kib), at: offset) == 300 * Self.kib)
    #expect(!box.backingHas("Library/Caches/c"), "then Caches")

    // Nothing purgeable is left: a write that partly fits is short, the next one fails.
    let big = [UInt8](repeating: 3, count: 1024 * Self.kib)
    let short = try box.write(document, big, at: off_t(500 * Self.kib))
    #expect(short > 0 && short < big.count)
    #expect(throws: Errno.noSpace) { try box.write(document, big, at: off_t(500 * Self.kib + short)) }
    #expect(box.used <= box.fs.storage.books.withLock { $0.ledger.capacity })

    let purges = box.events("purge")
    #expect(purges.count == 2)
    #expect(purges.first?.contains("\"domain\":\"tmp\"") == true)
    #expect(purges.last?.contains("\"domain\":\"caches\"") == true)
    #expect(box.eventually { Set(box.notifier.names) == ["t", "c"] }, "the kernel hears of both purges")
    #expect(box.fs.storage.books.withLock { $0.noSpaceRefusals } == 1)
    try box.expectExactBooks()
  }

  @Test("an open file is never purged")
  func openFilesStay() throws {
    let box = try Sandbox()
    let open = try box.create("tmp/open")
    _ = try box.write(open, [UInt8](repeating: 1, count: 128 * Self.kib))
    try box.makeFile("tmp/closed", bytes: 128 * Self.kib)
    let result = box.fs.purge(.domain(.tmp))
    #expect(result.files == 1)
    #expect(box.backingHas("tmp/open") && !box.backingHas("tmp/closed"))
    box.release(open)
    try box.expectExactBooks()
  }
}
