import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's claim on its backing directory: an exclusive `flock` on a descriptor of
/// the directory itself, held until the daemon exits (the kernel drops it then, even
/// after `kill -9`). A second mount of the same directory would keep books of its own
/// that diverge from the first's, so it is refused. Nothing is written to the backing
/// tree.
struct BackingLock {
  /// The locked descriptor (kept open for the daemon's life).
  let fd: Int32

  /// Locks `backing`, or throws 75 naming the mount that holds it.
  static func acquire(_ backing: String) throws(CLIError) -> BackingLock {
    let fd: Int32
    do { fd = try Sys.open(backing, O_RDONLY | O_DIRECTORY) } catch {
      throw CLIError(.noInput, "cannot open the backing directory \(backing): \(error)")
    }
    do { try Sys.lockExclusively(fd) } catch {
      let st = try? Sys.fstat(fd)  // absent is the meaning: the holder is then not named, still refused
      Sys.close(fd)
      guard error == .wouldBlock else {
        throw CLIError(.osError, "cannot lock the backing directory \(backing): \(error)")
      }
      let holder = st.flatMap(holder(of:))
      throw CLIError(
        .busy,
        "the backing directory \(backing) is already in use by "
          + (holder.map { describe(pid: $0) } ?? "another AppBox mount")
          + "; unmount that first (two mounts of one backing directory would keep diverging books)")
    }
    return BackingLock(fd: fd)
  }

  /// The process holding a `flock` on the file `st` describes, from `/proc/locks`.
  static func holder(of st: stat) -> pid_t? {
    guard let table = try? Sys.readFile("/proc/locks") else { return nil }  // absent: holder unknown
    // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" (major and minor in hex).
    let device = UInt64(st.st_dev)
    let major: UInt64 = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
    let minor: UInt64 = (device & 0xff) | ((device >> 12) & ~0xff)
    let wanted = String(format2(major)) + ":" + format2(minor) + ":" + String(st.st_ino)
    for line in table.split(separator: 0x0A) {
      let fields = line.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
      if fields.count > 5, fields[1] == "FLOCK", fields[5] == wanted, let pid = pid_t(fields[4]) { return pid }
    }
    return nil
  }

  /// `%02x`.
  private static func format2(_ value: UInt64) -> String {
    let text = String(value, radix: 16)
    return text.count < 2 ? "0" + text : text
  }

  /// "the mount at M (daemon pid P)" when `pid` is the daemon of a mount this user can
  /// see the runtime files of, else "the daemon with pid P".
  static func describe(pid: pid_t) -> String {
    let mounts = (try? MountTable.mounts()) ?? []  // absent is the meaning: only the pid is named
    for mount in mounts where mount.isAppBox {
      guard let owner = mount.ownerUID else { continue }
      var directories = (try? RuntimeDirectory.standard(for: owner)) ?? []  // absent is the meaning: none found
      // Absent is the meaning: no runtime directory of ours to look in.
      if owner == Sys.effectiveUID, let current = try? RuntimeDirectory.current() { directories.insert(current, at: 0) }
      if directories.contains(where: { $0.files(for: mount.mountpoint).daemonPID == pid }) {
        return "the mount at \(mount.mountpoint) (daemon pid \(pid))"
      }
    }
    return "the AppBox daemon with pid \(pid)"
  }
}
