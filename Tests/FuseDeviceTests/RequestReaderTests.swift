import CFuseDevice
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The device I/O lets one worker at a time read requests (CFuseDevice's reader.c): the
/// reader keeps the reading after a quick request and passes it to a waiting worker before a
/// long one. Here the "device" is a SOCK_SEQPACKET socket, which, like /dev/fuse, gives one
/// message per read; each worker takes one request and stops. Work a worker defers
/// (deferred.c) runs after its next reply, or before it waits on an empty device.
@Suite("One reader at a time", .serialized)
struct RequestReaderTests {
  @Test(
    "a long request passes the reading to the waiting worker",
    arguments: [
      Request.fsync, .flush, .fallocate, .truncate, .read(bytes: 1 << 20), .write(bytes: 128 * 1024),
    ])
  func longRequestHandsOff(_ long: Request) throws {
    let device = try Device()
    let workers = Workers(device: device, count: 2)
    try device.send(long)
    try device.send(.getattr)
    // Whichever worker read the long request no longer reads: the other must take the next.
    #expect(workers.wait(for: 2), "taken: \(workers.taken)")
    #expect(workers.taken.sorted() == [Request.getattr.opcode, long.opcode].sorted())
  }

  @Test(
    "a quick request keeps the reading; a handler's hand-off passes it on",
    arguments: [Request.getattr, .lookup, .release, .read(bytes: 4096), .write(bytes: 4096), .chmod])
  func quickRequestKeepsReading(_ quick: Request) throws {
    let device = try Device()
    let workers = Workers(device: device, count: 2)
    try device.send(quick)
    #expect(workers.wait(for: 1))
    try device.send(.getattr)
    // The worker serving the quick request will read the next one itself: the other waits.
    Thread.sleep(forTimeInterval: 0.2)
    #expect(workers.taken.count == 1, "a second worker read although the reader kept the reading")
    cfuse_device_hand_off()
    #expect(workers.wait(for: 2), "taken: \(workers.taken)")
  }

  @Test("deferred work waits while a request is queued, and runs after the reply")
  func deferredWorkRunsAfterTheReply() throws {
    let device = try Device()
    let count = DeferredCount()
    cfuse_device_defer(DeferredCount.add, Unmanaged.passUnretained(count).toOpaque(), 2, 0)
    try device.send(.getattr)
    var buffer = [UInt8](repeating: 0, count: 4096)
    let got = buffer.withUnsafeMutableBytes { cfuse_device_take_request(device.reading, $0.baseAddress, $0.count) }
    #expect(got == Request.getattr.message.count)
    #expect(count.value == 0, "ran before the queued request was answered")
    cfuse_device_run_deferred()  // what the device I/O does after writing the reply
    #expect(count.value == 2)
    #expect(!cfuse_device_has_deferred())
  }

  @Test("deferred work runs before the reader waits on an empty device")
  func deferredWorkRunsWhenIdle() throws {
    let device = try Device()
    let count = DeferredCount()
    let thread = Thread {  // holds `count` until the reader returns
      cfuse_device_defer(DeferredCount.add, Unmanaged.passUnretained(count).toOpaque(), 1, 0)
      var buffer = [UInt8](repeating: 0, count: 4096)
      _ = buffer.withUnsafeMutableBytes { cfuse_device_take_request(device.reading, $0.baseAddress, $0.count) }
    }
    thread.start()
    var ran = false
    for _ in 0..<500 where !ran {
      Thread.sleep(forTimeInterval: 0.01)
      ran = count.value == 1
    }
    #expect(ran, "the deferred work did not run while the reader waited")
    try device.send(.getattr)  // lets the reader return
  }
}

/// Counts what deferred work added (the work's first argument).
final class DeferredCount: Sendable {
  private let total = Atomic<UInt64>(0)
  var value: UInt64 { total.load(ordering: .relaxed) }

  static let add: cfuse_deferred_fn = { context, amount, _ in
    Unmanaged<DeferredCount>.fromOpaque(context!).takeUnretainedValue().total.add(amount, ordering: .relaxed)
  }
}

/// A FUSE request as the kernel writes it: fuse_in_header, then the operation's arguments.
enum Request: Sendable, CustomTestStringConvertible {
  case getattr, lookup, release, chmod, truncate, fsync, flush, fallocate
  case read(bytes: UInt32)
  case write(bytes: Int)

  var opcode: UInt32 {
    switch self {
    case .lookup: 1
    case .getattr: 3
    case .chmod, .truncate: 4
    case .read: 15
    case .write: 16
    case .release: 18
    case .fsync: 20
    case .flush: 25
    case .fallocate: 43
    }
  }

  var testDescription: String { "\(self)" }

  /// The arguments after the header (only the fields the reader looks at are set).
  var arguments: [UInt8] {
    switch self {
    case .chmod: Self.little(UInt32(1 << 0)) + [UInt8](repeating: 0, count: 84)  // FATTR_MODE
    case .truncate: Self.little(UInt32(1 << 3)) + [UInt8](repeating: 0, count: 84)  // FATTR_SIZE
    case .read(let bytes): [UInt8](repeating: 0, count: 16) + Self.little(bytes) + [UInt8](repeating: 0, count: 20)
    case .write(let bytes): [UInt8](repeating: 0, count: 40 + bytes)
    case .lookup: Array("name\0".utf8)
    default: [UInt8](repeating: 0, count: 16)
    }
  }

  var message: [UInt8] {
    let body = arguments
    var header = Self.little(UInt32(40 + body.count)) + Self.little(opcode)
    header += [UInt8](repeating: 0, count: 32)  // unique, nodeid, uid, gid, pid, extlen, padding
    return header + body
  }

  static func little(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
}

/// A socket pair standing in for /dev/fuse.
final class Device: Sendable {
  let reading: Int32
  let writing: Int32

  init() throws {
    var fds: [Int32] = [0, 0]
    guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
      throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
    var size: Int32 = 4 << 20
    setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    (reading, writing) = (fds[0], fds[1])
  }

  deinit {
    close(reading)
    close(writing)
  }

  func send(_ request: Request) throws {
    let message = request.message
    let sent = message.withUnsafeBytes { Glibc.send(writing, $0.baseAddress, $0.count, 0) }
    guard sent == message.count else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
  }
}

final class Opcodes: Sendable {
  let list = Mutex<[UInt32]>([])
}

/// Threads that each take one request through the reader and record its opcode.
final class Workers: Sendable {
  private let opcodes = Opcodes()

  init(device: Device, count: Int) {
    for _ in 0..<count {
      let thread = Thread { [opcodes] in
        var buffer = [UInt8](repeating: 0, count: 1 << 21)
        let got = buffer.withUnsafeMutableBytes { cfuse_device_take_request(device.reading, $0.baseAddress, $0.count) }
        let opcode = got >= 8 ? UInt32(buffer[4]) | UInt32(buffer[5]) << 8 : UInt32.max
        opcodes.list.withLock { $0.append(opcode) }
      }
      thread.start()
    }
    Thread.sleep(forTimeInterval: 0.1)  // both inside the reader: one reading, one waiting
  }

  var taken: [UInt32] { opcodes.list.withLock { $0 } }

  /// Waits up to 5 s until `count` requests have been taken.
  func wait(for count: Int) -> Bool {
    for _ in 0..<500 {
      if taken.count >= count { return true }
      Thread.sleep(forTimeInterval: 0.01)
    }
    return false
  }
}
