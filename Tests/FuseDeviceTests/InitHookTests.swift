import CFuse
import CFuseDevice
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The INIT hook (device.c), which the daemon waits on before it reports a mount ready:
/// it hears, once, whether the kernel took libfuse's answer to INIT or libfuse refused
/// it. Here libfuse's own session answers an INIT the test hands it, and its reply goes
/// into a SOCK_SEQPACKET socket (one message per read, as /dev/fuse); no mount.
@Suite("The INIT hook", .serialized)
struct InitHookTests {
  /// What the hook heard (the test's thread is the only one).
  final class Heard {
    var errors: [Int32] = []
  }

  /// Runs one INIT through a session made with `options` whose init callback puts
  /// `maxRead` in the answer; returns the error of the reply the "kernel" got and what
  /// the hook heard.
  static func handshake(options: [String], maxRead: UInt32) throws -> (reply: Int32, heard: [Int32]) {
    var fds: [Int32] = [-1, -1]
    try #require(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0)
    defer { close(fds[1]) }
    var answered = maxRead
    var ops = fuse_lowlevel_ops()
    ops.`init` = { userdata, conn in conn!.pointee.max_read = userdata!.load(as: UInt32.self) }
    var argv: [UnsafeMutablePointer<CChar>?] = (["test"] + options).map { strdup($0) }
    defer { argv.forEach { free($0) } }
    let session = withUnsafeMutablePointer(to: &answered) { userdata in
      argv.withUnsafeMutableBufferPointer { buffer -> OpaquePointer? in
        var args = cfuse_args_init(Int32(buffer.count), buffer.baseAddress)
        defer { fuse_opt_free_args(&args) }
        return fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size, userdata)
      }
    }
    let se = try #require(session)
    defer { fuse_session_destroy(se) }  // closes fds[0]
    // cfuse_device_install takes a mounted session's descriptor: give the session the
    // socket first, through plain custom I/O, which the install then replaces (libfuse
    // keeps the first copy: a few bytes, once per test).
    var plain = fuse_custom_io()
    plain.read = { fd, buffer, count, _ in read(fd, buffer, count) }
    plain.writev = { fd, iov, count, _ in writev(fd, iov, count) }
    try #require(fuse_session_custom_io(se, &plain, fds[0]) == 0)
    try #require(cfuse_device_install(se, 0) == 0)
    let heard = Heard()
    cfuse_device_on_init(
      { context, error in Unmanaged<Heard>.fromOpaque(context!).takeUnretainedValue().errors.append(error) },
      Unmanaged.passUnretained(heard).toOpaque())
    defer { cfuse_device_on_init(nil, nil) }

    // The kernel's INIT: fuse_in_header (40 bytes), then fuse_init_in (64 bytes).
    var request = [UInt8]()
    func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { request += $0 } }
    put(UInt32(104)); put(UInt32(26)); put(UInt64(2)); put(UInt64(0))  // len, INIT, unique, node
    put(UInt32(0)); put(UInt32(0)); put(UInt32(0)); put(UInt16(0)); put(UInt16(0))  // uid, gid, pid, extlen, pad
    put(UInt32(7)); put(UInt32(38)); put(UInt32(131_072)); put(UInt32(0)); put(UInt32(0))  // 7.38, readahead, flags
    request += [UInt8](repeating: 0, count: 44)
    try #require(request.count == 104)

    // Processed as libfuse's loop would after reading it; the read itself (the shared
    // reader, reader.c) is left out so that this test cannot disturb RequestReaderTests.
    request.withUnsafeMutableBytes { bytes in
      var buffer = fuse_buf()
      buffer.size = bytes.count
      buffer.mem = bytes.baseAddress
      fuse_session_process_buf(se, &buffer)
    }
    var reply = [UInt8](repeating: 0, count: 4096)
    let got = read(fds[1], &reply, reply.count)
    try #require(got >= 16)
    let error = reply.withUnsafeBytes { $0.load(fromByteOffset: 4, as: Int32.self) }
    return (error, heard.errors)
  }

  @Test("an answered INIT is heard as 0, once")
  func answered() throws {
    let outcome = try Self.handshake(options: [], maxRead: 0)
    #expect(outcome.reply == 0)
    #expect(outcome.heard == [0])
  }

  @Test("-o max_read answered with the same max_read is heard as 0")
  func maxReadAgrees() throws {
    let outcome = try Self.handshake(options: ["-o", "max_read=8192"], maxRead: 8192)
    #expect(outcome.reply == 0)
    #expect(outcome.heard == [0])
  }

  @Test("an INIT libfuse refuses (max_read not in the answer) is heard as its errno: no ready")
  func refused() throws {
    let outcome = try Self.handshake(options: ["-o", "max_read=8192"], maxRead: 0)
    #expect(outcome.reply == -EPROTO)
    #expect(outcome.heard == [EPROTO])
  }
}
