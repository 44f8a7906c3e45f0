import AppBoxFS
import Foundation
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

/// Restores an app's domain from an unencrypted iOS backup (AppBox's or a real
/// device's) into a new backing directory, as a device restore does: Documents and
/// Library come back with their bytes, modes, times, classes and attributes; Caches and
/// tmp are empty; excluded items are absent.
///
/// Everything is built in a staging directory beside the target and renamed into place
/// at the end, so a bad or truncated backup leaves nothing behind. Directories are
/// opened one component at a time with `O_NOFOLLOW`, so no path in a backup can lead
/// outside the new directory.
final class BackupRestorer {

  /// What was restored.
  struct Summary {
    var files = 0
    var directories = 0
    var symlinks = 0
    var bytes: Int64 = 0
    /// Rows outside Documents and Library (Caches, tmp, others): not restored.
    var skipped = 0
    /// Rows excluded by their attributes: not restored.
    var excluded = 0
  }

  private let backup: String
  private var summary = Summary()
  private var rootFD: Int32 = -1
  /// The open directories from the root to the last row's parent: components, descriptor,
  /// and the record to apply (mode, times) once everything inside is restored.
  private var stack: [(name: [UInt8], fd: Int32, record: BackupFileRecord?)] = []
  /// Restored files by inode number, for hard links: path and size.
  private var restoredInodes: [UInt64: (components: [[UInt8]], size: Int64)] = [:]
  private var excludedPrefixes: [[[UInt8]]] = []

  private var progress: ProgressLine

  /// A restorer reading the backup directory `backup`; `progress` shows counts on
  /// standard error.
  init(backup: String, progress: Bool) {
    self.backup = backup
    self.progress = ProgressLine(enabled: progress, verb: "restoring")
  }

  deinit {
    for entry in stack { Sys.close(entry.fd) }
    if rootFD >= 0 { Sys.close(rootFD) }
  }

  /// The app domains (`AppDomain-…`) of the backup and its database.
  func open() throws(CLIError) -> (ManifestDatabase, [String]) {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: backup, isDirectory: &isDirectory), isDirectory.boolValue else {
      throw CLIError(.noInput, "\(backup) is not a directory")
    }
    guard let manifest = FileManager.default.contents(atPath: backup + "/Manifest.plist") else {
      throw CLIError(.badValue, "\(backup) is not an iOS backup: no Manifest.plist")
    }
    let plist = try? PropertyListSerialization.propertyList(from: manifest, options: [], format: nil) as? [String: Any]
    guard let plist else {
      throw CLIError(.badValue, "\(backup)/Manifest.plist is not a property list (truncated?)")
    }
    if plist["IsEncrypted"] as? Bool == true {
      throw CLIError(.badValue, "\(backup) is encrypted: AppBox restores unencrypted backups only")
    }
    guard FileManager.default.fileExists(atPath: backup + "/Manifest.db") else {
      throw CLIError(.badValue, "\(backup) is not an iOS backup: no Manifest.db")
    }
    do throws(ManifestDatabase.Failure) {
      let database = try ManifestDatabase(path: backup + "/Manifest.db", create: false)
      return (database, try database.domains().filter { BackupRules.bundleID(ofDomain: $0) != nil })
    } catch {
      throw CLIError(.badValue, "\(backup)/Manifest.db: \(error)")
    }
  }

  /// Restores `domain` of `database` into `target`, which must not exist or be empty.
  func restore(_ database: ManifestDatabase, domain: String, into target: String) throws(CLIError) -> Summary {
    if let entries = try? FileManager.default.contentsOfDirectory(atPath: target), !entries.isEmpty {
      throw CLIError(.noInput, "\(target) is not empty: restore into a new or empty directory")
    }
    var isDirectory: ObjCBool = false
    if FileManager.default.fileExists(atPath: target, isDirectory: &isDirectory), !isDirectory.boolValue {
      throw CLIError(.noInput, "\(target) is not a directory")
    }
    let rows: [ManifestDatabase.Row]
    do throws(ManifestDatabase.Failure) {
      rows = try database.rows(domain: domain)
    } catch {
      throw CLIError(.badValue, "\(backup)/Manifest.db: \(error)")
    }
    let parent = (target as NSString).deletingLastPathComponent
    let staging =
      (parent.isEmpty ? "." : parent) + "/.\((target as NSString).lastPathComponent).appbox-restore-\(Sys.processID)"
    do throws(Errno) {
      try Sys.mkdirat(AT_FDCWD, staging, 0o755)
      rootFD = try Sys.openat(AT_FDCWD, staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    } catch {
      throw CLIError(.noInput, "cannot create \(staging): \(error)")
    }
    defer { progress.finish() }
    do throws(CLIError) {
      try makeLayout()
      try restoreRows(rows)
      try closeDirectories(keeping: 0)
      do { try Sys.rename(staging, to: target) } catch {
        throw CLIError(.osError, "cannot rename \(staging) to \(target): \(error)")
      }
    } catch {
      try? FileManager.default.removeItem(atPath: staging)
      throw error
    }
    return summary
  }

  // MARK: - Rows

  private func restoreRows(_ rows: [ManifestDatabase.Row]) throws(CLIError) {
    var entries: [(components: [[UInt8]], row: ManifestDatabase.Row)] = []
    for row in rows {
      if row.relativePath.isEmpty { continue }  // the domain's own directory
      let components = row.relativePath.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(
        Array.init)
      guard !row.relativePath.contains(0),
        components.allSatisfy({ !$0.isEmpty && $0 != [0x2E] && $0 != [0x2E, 0x2E] })
      else {
        throw CLIError(
          .badValue, "bad backup: the path \(Self.text(row.relativePath)) is not a relative path")
      }
      guard BackupRules.restorableComponents(row.relativePath) != nil else {
        summary.skipped += 1
        continue
      }
      entries.append((components, row))
    }
    // Parents before children, and each directory's subtree contiguous.
    entries.sort { $0.components.lexicographicallyPrecedes($1.components) { $0.lexicographicallyPrecedes($1) } }
    for (components, row) in entries {
      if excludedPrefixes.contains(where: { components.starts(with: $0) }) { continue }
      let record: BackupFileRecord
      do throws(BackupFileRecord.ReadError) {
        record = try BackupFileRecord.unarchive(row.file, relativePath: row.relativePath, flags: row.flags)
      } catch {
        throw CLIError(.badValue, "bad backup: \(Self.text(row.relativePath)): \(error)")
      }
      if BackupRules.exclusion(record.extendedAttributes) != nil {
        summary.excluded += 1
        excludedPrefixes.append(components)
        continue
      }
      try restore(record, components: components, fileID: row.fileID)
      progress.update(files: summary.files + summary.directories + summary.symlinks, bytes: summary.bytes)
    }
  }

  private func restore(_ record: BackupFileRecord, components: [[UInt8]], fileID: String) throws(CLIError) {
    let parentFD = try openParent(of: components)
    let name = (components[components.count - 1] + [0]).map { CChar(bitPattern: $0) }
    do {
      switch record.kind {
      case .directory:
        // The sandbox's fixed directories are made first (opened below only if they
        // are directories).
        try Self.makeDirectory(parentFD, name, 0o700, existing: components.count <= 2)
        let fd = try Sys.openat(parentFD, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        stack.append((components[components.count - 1], fd, record))
        try setAttributes(fd, record)
        summary.directories += 1
      case .symlink:
        guard let target = record.target else {
          throw CLIError(
            .badValue, "bad backup: the symlink \(Self.text(record.relativePath)) has no Target")
        }
        try Sys.symlinkat((target + [0]).map { CChar(bitPattern: $0) }, parentFD, name)
        let fd = try Sys.openat(parentFD, name, Linux.openPath | O_NOFOLLOW | O_CLOEXEC)
        defer { Sys.close(fd) }
        let time = timespec(tv_sec: Int(record.lastModified), tv_nsec: 0)
        try Sys.utimens(fd, isSymlink: true, (time, time))
        summary.symlinks += 1
      case .file:
        try restoreFile(record, components: components, parentFD: parentFD, name: name, fileID: fileID)
      }
    } catch let error as CLIError {
      throw error
    } catch {
      throw CLIError(.osError, "cannot restore \(Self.text(record.relativePath)): \(error)")
    }
  }

  private func restoreFile(
    _ record: BackupFileRecord, components: [[UInt8]], parentFD: Int32, name: [CChar], fileID: String
  ) throws(CLIError) {
    summary.files += 1
    summary.bytes += record.size
    if record.inode != 0, let first = restoredInodes[record.inode], first.size == record.size {
      do throws(Errno) {
        let existing = try openBeneath(first.components)
        defer { Sys.close(existing) }
        try Sys.link(existing, parentFD, name)
        return
      } catch {
        throw CLIError(.osError, "cannot link \(Self.text(record.relativePath)): \(error)")
      }
    }
    guard fileID.count == 40, fileID.utf8.allSatisfy({ $0.isHexDigit }) else {
      throw CLIError(.badValue, "bad backup: \(Self.text(record.relativePath)) has the file id \(fileID)")
    }
    let source: Int32
    do throws(Errno) {
      source = try Sys.openat(
        AT_FDCWD, backup + "/" + BackupRules.contentPath(fileID: fileID), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
    } catch {
      throw CLIError(
        .badValue,
        "bad or truncated backup: the bytes of \(Self.text(record.relativePath)) (\(fileID)) are missing: \(error)")
    }
    defer { Sys.close(source) }
    do {
      let size = Int64(try Sys.fstat(source).st_size)
      guard size == record.size else {
        throw CLIError(
          .badValue,
          "bad or truncated backup: \(Self.text(record.relativePath)) (\(fileID)) holds \(size) bytes, the manifest says \(record.size)"
        )
      }
      let out = try Sys.openat(parentFD, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
      defer { Sys.close(out) }
      var done: Int64 = 0
      while done < size {
        let moved = try Sys.copyFileRange(source, off_t(done), out, off_t(done), Int(min(size - done, 1 << 30)), 0)
        guard moved > 0 else {
          throw CLIError(.badValue, "bad backup: \(Self.text(record.relativePath)) ended early")
        }
        done += Int64(moved)
      }
      try setAttributes(out, record)
      if record.inode != 0 { restoredInodes[record.inode] = (components, size) }
    } catch let error as CLIError {
      throw error
    } catch {
      throw CLIError(.osError, "cannot restore \(Self.text(record.relativePath)): \(error)")
    }
  }

  /// Attributes, class, mode and (for files) times of a new file or directory.
  private func setAttributes(_ fd: Int32, _ record: BackupFileRecord) throws(Errno) {
    for (name, value) in record.extendedAttributes {
      let backingName = XattrNameMapping.backingName(forMountName: name)
      // A backup cannot set AppBox's own attributes, nor the kernel's namespaces.
      guard !XattrNameMapping.isReserved(name), backingName.starts(with: "user.".utf8) else { continue }
      try Xattr.set(fd, name: String(decoding: backingName, as: UTF8.self), value: value)
    }
    if let protection = Self.protectionClass(appleNumber: record.protectionClass), protection != .containerDefault {
      try Xattr.set(fd, name: AppBoxAttribute.protection.name, value: Array(protection.name.utf8))
    }
    // A directory's mode waits until its contents are made (it may deny writing).
    guard record.kind == .file else { return }
    try Sys.fchmod(fd, mode_t(record.mode & 0o7777))
    let time = timespec(tv_sec: Int(record.lastModified), tv_nsec: 0)
    try Sys.futimens(fd, (time, time))
  }

  static func protectionClass(appleNumber: Int64) -> ProtectionClass? {
    ProtectionClass.allCases.first { Int64($0.appleNumber) == appleNumber }
  }

  // MARK: - Directories

  /// The parent directory of `components`, opened (and made when the backup has no row
  /// for it) component by component without following symlinks.
  private func openParent(of components: [[UInt8]]) throws(CLIError) -> Int32 {
    let parent = components.dropLast()
    var common = 0
    while common < stack.count, common < parent.count, stack[common].name == parent[parent.startIndex + common] {
      common += 1
    }
    try closeDirectories(keeping: common)
    for component in parent.dropFirst(common) {
      let at = stack.last?.fd ?? rootFD
      let name = (component + [0]).map { CChar(bitPattern: $0) }
      do throws(Errno) {
        try Self.makeDirectory(at, name, 0o755, existing: true)
        let fd = try Sys.openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        stack.append((component, fd, nil))
      } catch {
        throw CLIError(
          .badValue,
          "bad backup: cannot make the directory \(Self.text(Array(components.joined(separator: [0x2F])))): \(error)"
        )
      }
    }
    return stack.last?.fd ?? rootFD
  }

  /// Closes open directories down to `count`, giving each its recorded mode and times
  /// once its contents are complete.
  private func closeDirectories(keeping count: Int) throws(CLIError) {
    while stack.count > count {
      let entry = stack.removeLast()
      defer { Sys.close(entry.fd) }
      if let record = entry.record {
        let time = timespec(tv_sec: Int(record.lastModified), tv_nsec: 0)
        do throws(Errno) {
          try Sys.fchmod(entry.fd, mode_t(record.mode & 0o7777))
          try Sys.futimens(entry.fd, (time, time))
        } catch {
          throw CLIError(
            .osError, "cannot set the mode and times of \(Self.text(record.relativePath)): \(error)")
        }
      }
    }
  }

  /// `mkdirat`; an existing entry is fine when `existing` (opening it then checks that it
  /// is a directory).
  private static func makeDirectory(_ at: Int32, _ name: [CChar], _ mode: mode_t, existing: Bool) throws(Errno) {
    do throws(Errno) {
      try Sys.mkdirat(at, name, mode)
    } catch {
      if !(existing && error == .exists) { throw error }
    }
  }

  /// Opens a restored file by its components, each without following symlinks.
  private func openBeneath(_ components: [[UInt8]]) throws(Errno) -> Int32 {
    var fd = try Sys.dup(rootFD)
    for (index, component) in components.enumerated() {
      let last = index == components.count - 1
      let flags = last ? Linux.openPath | O_NOFOLLOW | O_CLOEXEC : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
      let next: Int32
      do throws(Errno) {
        next = try Sys.openat(fd, (component + [0]).map { CChar(bitPattern: $0) }, flags)
      } catch {
        Sys.close(fd)
        throw error
      }
      Sys.close(fd)
      fd = next
    }
    return fd
  }

  /// The sandbox's fixed directories (Caches and tmp empty) and its default class.
  private func makeLayout() throws(CLIError) {
    do throws(Errno) {
      for path in [
        "Documents", "Library", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp",
      ] {
        try Self.makeDirectory(rootFD, Array(path.utf8CString), 0o755, existing: true)
      }
      try Xattr.set(
        rootFD, name: DefaultProtection.attributeName, value: Array(ProtectionClass.containerDefault.name.utf8))
    } catch {
      throw CLIError(.osError, "cannot make the sandbox's directories: \(error)")
    }
  }

  private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
}

extension UInt8 {
  fileprivate var isHexDigit: Bool { (0x30...0x39).contains(self) || (0x61...0x66).contains(self) }
}
