import FilesystemInterface
import Posix
import Synchronization

/// The kernel's writeback cache on this process's mount (``FuseConfiguration/writeCache``):
/// whether INIT turned it on, and how much the kernel may hold unwritten for the mount.
enum WriteCacheState {
  /// Set at INIT when the kernel was asked for the writeback cache and offered it.
  static let negotiated = Atomic<Bool>(false)
  /// The kernel's dirty-page limit for the mount's backing device, in bytes (0: unknown).
  static let dirtyLimit = Atomic<Int64>(0)

  /// What the driver reports: nil unless negotiated.
  static var current: WriteCache? {
    guard negotiated.load(ordering: .acquiring) else { return nil }
    let limit = dirtyLimit.load(ordering: .relaxed)
    return WriteCache(dirtyLimit: limit > 0 ? limit : fallbackDirtyLimit)
  }

  /// What is assumed where the kernel does not say (a kernel before 6.2 has no
  /// `max_bytes`): the limit FUSE's 1% share of the dirty pages gives a machine with 32 GiB.
  static let fallbackDirtyLimit: Int64 = 64 << 20

  /// Reads the dirty-page limit of the FUSE mount at `mountpoint` (absolute, as the mount
  /// table shows it): the mount's device from `/proc/self/mountinfo`, then `max_bytes` of
  /// its backing device info. Called once the mount exists, before INIT (a `stat` of the
  /// mountpoint would wait for INIT). Leaves the fallback when either cannot be read.
  static func readDirtyLimit(mountpoint: String) {
    guard let device = mountDevice(mountpoint),
      let text = try? Sys.readFile("/sys/class/bdi/\(device)/max_bytes"),  // absent: the fallback
      let field = text.split(whereSeparator: { $0 == 0x0A || $0 == 0x20 }).first,
      let bytes = Int64(String(decoding: field, as: UTF8.self)), bytes > 0
    else { return }
    dirtyLimit.store(bytes, ordering: .relaxed)
  }

  /// The `MAJOR:MINOR` of the last FUSE mount at `mountpoint`.
  private static func mountDevice(_ mountpoint: String) -> String? {
    guard let table = try? Sys.readFile("/proc/self/mountinfo") else { return nil }  // absent: unknown
    var device: String?
    for line in table.split(separator: 0x0A) {
      let fields = line.split(separator: 0x20)
      guard fields.count > 6, let dash = fields.firstIndex(where: { $0.elementsEqual("-".utf8) }),
        dash + 1 < fields.count, fields[dash + 1].starts(with: "fuse".utf8),
        String(decoding: fields[4], as: UTF8.self) == mountpoint
      else { continue }
      device = String(decoding: fields[2], as: UTF8.self)
    }
    return device
  }
}
