import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Errors

/// A system call that failed where the test expected success.
struct SyscallError: Error, CustomStringConvertible {
  let call: String
  let code: Int32
  var description: String { "\(call): \(String(cString: strerror(code))) (errno \(code))" }
}

/// The errno of a call returning -1 on failure, or 0 when it succeeded. Use as
/// `#expect(errnoOf(unlink(path)) == ENOENT)`: the argument is evaluated first, so errno
/// is read right after the call.
func errnoOf<T: BinaryInteger>(_ result: T) -> Int32 {
  result < 0 ? errno : 0
}

/// Returns `result`, or throws the current errno when it is negative.
@discardableResult
func check<T: BinaryInteger>(_ result: T, _ call: @autoclosure () -> String) throws -> T {
  if result < 0 { throw SyscallError(call: call(), code: errno) }
  return result
}

// MARK: - Constants the Glibc module does not export (x86_64 / generic Linux values)

enum LinuxConstants {
  static let O_DIRECT: Int32 = 0o40000
  static let SEEK_DATA: Int32 = 3
  static let SEEK_HOLE: Int32 = 4
  static let UTIME_NOW = (1 << 30) - 1
  static let UTIME_OMIT = (1 << 30) - 2
  static let XATTR_CREATE: Int32 = 1
  static let XATTR_REPLACE: Int32 = 2
  static let RENAME_NOREPLACE: UInt32 = 1
  static let RENAME_EXCHANGE: UInt32 = 2
  static let FALLOC_FL_KEEP_SIZE: Int32 = 1
  static let FALLOC_FL_PUNCH_HOLE: Int32 = 2

  /// glibc's `makedev`.
  static func makedev(_ major: UInt64, _ minor: UInt64) -> dev_t {
    dev_t((minor & 0xff) | ((major & 0xfff) << 8) | ((minor & ~0xff) << 12) | ((major & ~0xfff) << 32))
  }
}

// MARK: - libc functions the Glibc module does not import (resolved with dlsym)

/// GNU/Linux libc entry points that Swift's Glibc module leaves out (`_GNU_SOURCE`
/// declarations and `<sys/xattr.h>`), looked up in the already-loaded libc.
enum Libc {
  private static func symbol<F>(_ name: String, as type: F.Type) -> F {
    guard let pointer = dlsym(nil, name) else { fatalError("libc has no \(name)") }
    return unsafeBitCast(pointer, to: type)
  }

  typealias Path = UnsafePointer<CChar>

  nonisolated(unsafe) static let fallocate = symbol(
    "fallocate", as: (@convention(c) (Int32, Int32, off_t, off_t) -> Int32).self)
  nonisolated(unsafe) static let copyFileRange = symbol(
    "copy_file_range",
    as: (@convention(c) (Int32, UnsafeMutablePointer<off_t>?, Int32, UnsafeMutablePointer<off_t>?, Int, UInt32) -> Int)
      .self)
  nonisolated(unsafe) static let renameat2 = symbol(
    "renameat2", as: (@convention(c) (Int32, Path, Int32, Path, UInt32) -> Int32).self)
  nonisolated(unsafe) static let setxattr = symbol(
    "setxattr", as: (@convention(c) (Path, Path, UnsafeRawPointer?, Int, Int32) -> Int32).self)
  nonisolated(unsafe) static let getxattr = symbol(
    "getxattr", as: (@convention(c) (Path, Path, UnsafeMutableRawPointer?, Int) -> Int).self)
  nonisolated(unsafe) static let listxattr = symbol(
    "listxattr", as: (@convention(c) (Path, UnsafeMutablePointer<CChar>?, Int) -> Int).self)
  nonisolated(unsafe) static let removexattr = symbol(
    "removexattr", as: (@convention(c) (Path, Path) -> Int32).self)
  nonisolated(unsafe) static let fsetxattr = symbol(
    "fsetxattr", as: (@convention(c) (Int32, Path, UnsafeRawPointer?, Int, Int32) -> Int32).self)
  nonisolated(unsafe) static let fgetxattr = symbol(
    "fgetxattr", as: (@convention(c) (Int32, Path, UnsafeMutableRawPointer?, Int) -> Int).self)
  nonisolated(unsafe) static let statx = symbol(
    "statx", as: (@convention(c) (Int32, Path, Int32, UInt32, UnsafeMutableRawPointer?) -> Int32).self)
}

/// The mode of `path` as `statx(2)` reports it when asked for the mode alone
/// (`STATX_MODE`, as `stat -c %a` asks): on FUSE, what the kernel has cached unless its
/// attributes timed out or were invalidated.
func statxMode(_ path: String) throws -> mode_t {
  let buffer = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 8)  // struct statx
  defer { buffer.deallocate() }
  try check(Libc.statx(AT_FDCWD, path, 0, 0x2 /* STATX_MODE */, buffer), "statx \(path)")
  return mode_t(buffer.load(fromByteOffset: 28, as: UInt16.self))  // stx_mode
}

// MARK: - Files

/// `open(2)`, throwing on failure.
func openFile(_ path: String, _ flags: Int32, _ mode: mode_t = 0o644) throws -> Int32 {
  try check(open(path, flags | O_CLOEXEC, mode), "open \(path)")
}

/// Writes all of `bytes` at the current offset (or at `offset` with `pwrite`).
func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: off_t? = nil) throws {
  var done = 0
  while done < bytes.count {
    let n = bytes.withUnsafeBytes { buffer in
      let base = buffer.baseAddress! + done
      if let offset { return pwrite(fd, base, bytes.count - done, offset + off_t(done)) }
      return write(fd, base, bytes.count - done)
    }
    if n < 0 && errno == EINTR { continue }
    try check(n, "write fd \(fd)")
    if n == 0 { throw SyscallError(call: "write returned 0", code: EIO) }
    done += n
  }
}

/// Reads up to `count` bytes at `offset` with `pread` (short only at end of file).
func readAt(_ fd: Int32, count: Int, offset: off_t) throws -> [UInt8] {
  var buffer = [UInt8](repeating: 0, count: count)
  var done = 0
  while done < count {
    let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, offset + off_t(done)) }
    if n < 0 && errno == EINTR { continue }
    try check(n, "pread fd \(fd)")
    if n == 0 { break }
    done += n
  }
  return Array(buffer[..<done])
}

/// Reads from the current offset to end of file.
func readToEnd(_ fd: Int32) throws -> [UInt8] {
  var result: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 65536)
  while true {
    let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
    if n < 0 && errno == EINTR { continue }
    try check(n, "read fd \(fd)")
    if n == 0 { return result }
    result += chunk[..<n]
  }
}

/// The whole content of a file.
func readFile(_ path: String) throws -> [UInt8] {
  let fd = try openFile(path, O_RDONLY)
  defer { close(fd) }
  return try readToEnd(fd)
}

/// Creates or replaces a file with `bytes`.
func writeFile(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o644) throws {
  let fd = try openFile(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
  defer { close(fd) }
  try writeAll(fd, bytes)
}

/// The bytes of a string.
func bytes(_ string: String) -> [UInt8] { Array(string.utf8) }

/// `stat(2)`, throwing on failure.
func statPath(_ path: String) throws -> stat {
  var st = stat()
  try check(stat(path, &st), "stat \(path)")
  return st
}

/// `lstat(2)`, throwing on failure.
func lstatPath(_ path: String) throws -> stat {
  var st = stat()
  try check(lstat(path, &st), "lstat \(path)")
  return st
}

/// `fstat(2)`, throwing on failure.
func fstatFD(_ fd: Int32) throws -> stat {
  var st = stat()
  try check(fstat(fd, &st), "fstat \(fd)")
  return st
}

/// The file type bits of a mode.
func fileType(_ st: stat) -> mode_t { st.st_mode & S_IFMT }

/// `readlink(2)` as a string.
func readLink(_ path: String) throws -> String {
  var buffer = [CChar](repeating: 0, count: 4096)
  let n = try check(readlink(path, &buffer, buffer.count), "readlink \(path)")
  return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

// MARK: - Directories

/// One directory entry, name as raw bytes.
struct DirectoryEntry: Hashable {
  let name: [UInt8]
  let type: UInt8
  var string: String { String(decoding: name, as: UTF8.self) }
}

/// Every entry of a directory except `.` and `..`, in readdir order.
func directoryEntries(_ path: String) throws -> [DirectoryEntry] {
  guard let dir = opendir(path) else { throw SyscallError(call: "opendir \(path)", code: errno) }
  defer { closedir(dir) }
  return try readEntries(dir, limit: .max)
}

/// Reads up to `limit` entries (skipping `.` and `..`) from an open directory stream.
func readEntries(_ dir: OpaquePointer, limit: Int) throws -> [DirectoryEntry] {
  var entries: [DirectoryEntry] = []
  while entries.count < limit {
    errno = 0
    guard let entry = readdir(dir) else {
      if errno != 0 { throw SyscallError(call: "readdir", code: errno) }
      break
    }
    let name = withUnsafePointer(to: &entry.pointee.d_name) { pointer in
      pointer.withMemoryRebound(to: UInt8.self, capacity: 256) {
        Array(UnsafeBufferPointer(start: $0, count: strlen(UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))))
      }
    }
    if name == [0x2e] || name == [0x2e, 0x2e] { continue }
    entries.append(DirectoryEntry(name: name, type: entry.pointee.d_type))
  }
  return entries
}

/// Entry names (as strings) of a directory, sorted.
func directoryNames(_ path: String) throws -> [String] {
  try directoryEntries(path).map(\.string).sorted()
}

/// Runs `body` with a NUL-terminated C path made of raw bytes.
func withRawPath<R>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
  try (path + [0]).withUnsafeBufferPointer { buffer in
    try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
  }
}

// MARK: - Extended attributes

/// An xattr value, or throws its errno.
func getXattr(_ path: String, _ name: String) throws -> [UInt8] {
  let size = try check(Libc.getxattr(path, name, nil, 0), "getxattr \(name)")
  var buffer = [UInt8](repeating: 0, count: max(size, 1))
  let n = try check(
    buffer.withUnsafeMutableBytes { Libc.getxattr(path, name, $0.baseAddress, size) }, "getxattr \(name)")
  return Array(buffer[..<n])
}

/// Sets an xattr; returns the errno (0 on success).
@discardableResult
func setXattr(_ path: String, _ name: String, _ value: [UInt8], flags: Int32 = 0) -> Int32 {
  errnoOf(value.withUnsafeBytes { Libc.setxattr(path, name, $0.baseAddress, value.count, flags) })
}

/// The attribute names of a file, each as raw bytes, in list order.
func listXattr(_ path: String) throws -> [[UInt8]] {
  let size = try check(Libc.listxattr(path, nil, 0), "listxattr \(path)")
  if size == 0 { return [] }
  var buffer = [CChar](repeating: 0, count: size)
  let n = try check(Libc.listxattr(path, &buffer, size), "listxattr \(path)")
  return buffer[..<n].map { UInt8(bitPattern: $0) }.split(separator: 0).map(Array.init)
}

/// The attribute names of a backing file without AppBox's own metadata (its reserved
/// `user.appbox.` names other than encoded foreign names `user.appbox.x.`).
func backingXattrNames(_ path: String) throws -> [String] {
  try listXattrNames(path).filter { !$0.hasPrefix("user.appbox.") || $0.hasPrefix("user.appbox.x.") }
}

/// The attribute names of a file as strings.
func listXattrNames(_ path: String) throws -> [String] {
  try listXattr(path).map { String(decoding: $0, as: UTF8.self) }
}

// MARK: - Other users and programs

/// Runs a shell snippet as uid/gid 65534 (nobody/nogroup) with no supplementary groups.
func runAsNobody(_ script: String) throws -> CommandResult {
  try Command.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c", script])
}

/// Quotes a string for `sh`.
func shellQuote(_ string: String) -> String {
  "'" + string.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

// MARK: - Fixtures

extension MountFixture {
  /// A sandbox mounted UNLOCKED (`--unlocked`), so that files of the default class
  /// (`completeUntilFirstUserAuthentication`) are usable: these tests exercise POSIX
  /// operations, not Data Protection.
  static func unlocked(_ arguments: [String] = [], prepare: ((String) throws -> Void)? = nil) throws -> MountFixture {
    try MountFixture(arguments: ["--unlocked"] + arguments, prepare: prepare)
  }
}
