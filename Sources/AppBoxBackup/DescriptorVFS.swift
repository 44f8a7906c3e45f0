import CSQLite
import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// The SQLite VFS through which AppBox opens every `Manifest.db`: SQLite's unix VFS with
/// two changes, so that SQLite never opens a path another user could have redirected.
///
/// - Names are taken as they are (`xFullPathname` copies them): the unix VFS resolves
///   every symlink of a name to a plain path first, `/proc/self/fd/N` included, and
///   opens that path, which a parent swapped for a symlink leads elsewhere. So a backup
///   being written names its database `/proc/self/fd/D/Manifest.db`, D the staging
///   directory's descriptor: the kernel resolves the magic link to that directory, and
///   SQLite opens the last component with `O_NOFOLLOW`.
/// - The name `/proc/self/fd/N`, N a regular file's descriptor, opens a read-only file
///   over a duplicate of N (the unix VFS opens every database with `O_NOFOLLOW`, which
///   refuses that magic link): a backup's database is read from the very file AppBox
///   opened and checked, with `pread`, so nobody can swap in another file, a symlink or
///   a FIFO to block on. It is immutable to SQLite (`SQLITE_IOCAP_IMMUTABLE`: no locks,
///   no journal looked for, so a hostile backup's hot journal is never rolled in).
///
/// Every other file (temporary ones for sorting) is the unix VFS's.
enum DescriptorVFS {
  /// The VFS's name for `sqlite3_open_v2`, or nil when SQLite has no unix VFS to build
  /// it on. Registered once, for the process's life.
  static let name: String? = {
    guard let unix = sqlite3_vfs_find("unix") else { return nil }
    let name = "appbox-descriptor"
    let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
    vfs.initialize(to: unix.pointee)
    vfs.pointee.zName = UnsafePointer(strdup(name))
    vfs.pointee.pNext = nil
    vfs.pointee.szOsFile = max(unix.pointee.szOsFile, Int32(descriptorOffset + MemoryLayout<Int32>.size))
    vfs.pointee.xFullPathname = { _, path, capacity, out in
      guard let path, let out, strlen(path) < Int(capacity) else { return SQLITE_CANTOPEN }
      strcpy(out, path)
      return SQLITE_OK
    }
    vfs.pointee.xOpen = { _, path, file, flags, outFlags in
      guard let file else { return SQLITE_CANTOPEN }
      guard let fd = descriptor(named: path) else {
        guard let unix = sqlite3_vfs_find("unix"), let open = unix.pointee.xOpen else { return SQLITE_CANTOPEN }
        return open(unix, path, file, flags, outFlags)
      }
      guard flags & SQLITE_OPEN_MAIN_DB != 0, flags & SQLITE_OPEN_READONLY != 0 else { return SQLITE_CANTOPEN }
      let copy: Int32
      do throws(Errno) { copy = try Sys.dup(fd) } catch { return SQLITE_CANTOPEN }
      UnsafeMutableRawPointer(file).storeBytes(of: copy, toByteOffset: descriptorOffset, as: Int32.self)
      file.pointee.pMethods = UnsafePointer(readOnlyMethods)
      outFlags?.pointee = SQLITE_OPEN_READONLY
      return SQLITE_OK
    }
    return sqlite3_vfs_register(vfs, 0) == SQLITE_OK ? name : nil
  }()

  /// The name under which SQLite reads the regular file open as `fd`.
  static func name(ofFile fd: Int32) -> String { "/proc/self/fd/\(fd)" }

  /// The name under which SQLite opens `name` in the directory open as `directoryFD`.
  static func name(_ name: String, in directoryFD: Int32) -> String { "/proc/self/fd/\(directoryFD)/\(name)" }
}

// SQLite's extended result codes (macros Swift does not import): SQLITE_IOERR | (N << 8).
private let ioErrorRead = SQLITE_IOERR | 1 << 8
private let ioErrorShortRead = SQLITE_IOERR | 2 << 8
private let ioErrorFstat = SQLITE_IOERR | 7 << 8

/// Where a read-only file keeps its descriptor, after SQLite's `sqlite3_file`.
private let descriptorOffset = MemoryLayout<sqlite3_file>.stride

/// The descriptor in a name `/proc/self/fd/N` (digits only after the prefix), or nil.
private func descriptor(named path: UnsafePointer<CChar>?) -> Int32? {
  guard let path else { return nil }
  let prefix = "/proc/self/fd/"
  guard strncmp(path, prefix, prefix.utf8.count) == 0 else { return nil }
  var value: Int32 = 0
  var at = path + prefix.utf8.count
  guard at.pointee != 0 else { return nil }
  while at.pointee != 0 {
    let digit = Int32(at.pointee) - 0x30
    guard (0...9).contains(digit), value < Int32.max / 10 else { return nil }
    value = value * 10 + digit
    at += 1
  }
  return value
}

/// The descriptor of a read-only file.
private func fileDescriptor(_ file: UnsafeMutablePointer<sqlite3_file>?) -> Int32 {
  guard let file else { return -1 }
  return UnsafeMutableRawPointer(file).load(fromByteOffset: descriptorOffset, as: Int32.self)
}

/// The methods of a read-only file over a descriptor (version 1: no shared memory, no
/// memory mapping).
// nonisolated(unsafe): made once, on first use of `DescriptorVFS.name` (a lazy global
// is initialised exactly once), and never written after; SQLite only reads it.
private nonisolated(unsafe) let readOnlyMethods: UnsafeMutablePointer<sqlite3_io_methods> = {
  let methods = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
  methods.initialize(to: sqlite3_io_methods())
  methods.pointee.iVersion = 1
  methods.pointee.xClose = { file in
    Sys.close(fileDescriptor(file))
    return SQLITE_OK
  }
  methods.pointee.xRead = { file, buffer, amount, offset in
    guard let buffer, amount >= 0 else { return ioErrorRead }
    let fd = fileDescriptor(file)
    var done = 0
    while done < Int(amount) {
      let read: Int
      do throws(Errno) {
        read = try Sys.pread(
          fd, UnsafeMutableRawBufferPointer(start: buffer + done, count: Int(amount) - done),
          off_t(offset) + off_t(done))
      } catch {
        return ioErrorRead
      }
      if read == 0 { break }
      done += read
    }
    guard done == Int(amount) else {
      // SQLite wants the rest zeroed when the file ends sooner.
      memset(buffer + done, 0, Int(amount) - done)
      return ioErrorShortRead
    }
    return SQLITE_OK
  }
  methods.pointee.xWrite = { _, _, _, _ in SQLITE_READONLY }
  methods.pointee.xTruncate = { _, _ in SQLITE_READONLY }
  methods.pointee.xSync = { _, _ in SQLITE_OK }
  methods.pointee.xFileSize = { file, size in
    do throws(Errno) {
      size?.pointee = sqlite3_int64(try Sys.fstat(fileDescriptor(file)).st_size)
      return SQLITE_OK
    } catch {
      return ioErrorFstat
    }
  }
  methods.pointee.xLock = { _, _ in SQLITE_OK }
  methods.pointee.xUnlock = { _, _ in SQLITE_OK }
  methods.pointee.xCheckReservedLock = { _, reserved in
    reserved?.pointee = 0
    return SQLITE_OK
  }
  methods.pointee.xFileControl = { _, _, _ in SQLITE_NOTFOUND }
  methods.pointee.xSectorSize = { _ in 4096 }
  methods.pointee.xDeviceCharacteristics = { _ in SQLITE_IOCAP_IMMUTABLE }
  return methods
}()
