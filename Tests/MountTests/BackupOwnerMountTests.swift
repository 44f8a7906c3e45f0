import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Root backing up a mount of another user: the owner's daemon names the backing
/// directory, and the owner may have replaced it since; root's backup holds what the
/// owner could read of their own sandbox, and nothing of root's (docs/reference.md,
/// "Trust model of backup and restore").
@Suite("Backups of another user's mount", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct BackupOwnerMountTests {
  static let owner: uid_t = 65534

  /// A root-only sandbox-like tree with a secret, in a root-owned 0700 directory.
  static func rootOnlyTree() throws -> String {
    var template = Array("/tmp/appbox-rootonly-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw SyscallError(call: "mkdtemp", code: errno) }
    let root = String(cString: made)
    for directory in ["Documents", "Library/Preferences"] {
      try FileManager.default.createDirectory(atPath: root + "/" + directory, withIntermediateDirectories: true)
    }
    try writeFile(root + "/Documents/secret", bytes("root-only secret"), mode: 0o600)
    return root
  }

  /// Every byte under `directory`, as text (lossy), to look for a secret in.
  static func everything(under directory: String) -> String {
    var text = ""
    for relative in FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? [] {
      if let data = FileManager.default.contents(atPath: directory + "/" + relative) {
        text += String(decoding: data, as: UTF8.self)
      }
    }
    return text
  }

  @Test(
    "root backs up the owner's files; a backing directory the owner swapped for a symlink to root's files is refused (77)"
  )
  func swappedBacking() throws {
    let mount = try OtherUsersMount(uid: Self.owner, arguments: ["--unlocked"])
    let secrets = try Self.rootOnlyTree()
    defer { _ = try? FileManager.default.removeItem(atPath: secrets) }
    var template = Array("/tmp/appbox-backups-XXXXXX".utf8CString)
    let out = String(cString: try #require(mkdtemp(&template)))
    defer { _ = try? FileManager.default.removeItem(atPath: out) }

    let written = try OtherUser.run(
      Self.owner, ["/bin/sh", "-c", "echo the-owners-file > \(shellQuote(mount.mountpoint))/Documents/mine"])
    #expect(written.status == 0, "\(written.error)")
    let plain = try Command.run(Command.appbox, ["backup", mount.mountpoint, "--to", out + "/plain"])
    #expect(plain.status == 0, "\(plain.error)")
    #expect(Self.everything(under: out + "/plain").contains("the-owners-file"))

    // The owner owns the backing directory's parent, and swaps the directory for a
    // symlink to root's tree; the daemon still names the old path.
    #expect(chown(mount.root, Self.owner, Self.owner) == 0)
    let swapped = try OtherUser.run(
      Self.owner,
      [
        "/bin/sh", "-c",
        "mv \(shellQuote(mount.backing)) \(shellQuote(mount.backing)).real && ln -s \(shellQuote(secrets)) \(shellQuote(mount.backing))",
      ])
    #expect(swapped.status == 0, "\(swapped.error)")
    let attacked = try Command.run(Command.appbox, ["backup", mount.mountpoint, "--to", out + "/attacked"])
    #expect(attacked.status == 77, "exit \(attacked.status): \(attacked.error)")
    #expect(attacked.error.contains("symlink"), "\(attacked.error)")
    #expect(!FileManager.default.fileExists(atPath: out + "/attacked"))
    #expect(!Self.everything(under: out).contains("root-only secret"), "root's file went into a backup")
    let unmount = try Command.run(Command.appbox, ["unmount", mount.mountpoint])
    #expect(unmount.status == 0, "\(unmount.error)")
  }
}
