/// Apple's 61-byte binary plist of the string `com.apple.backupd`: the value Foundation
/// writes to `com.apple.metadata:com_apple_backup_excludeItem`, spelled here by the tests
/// themselves (not through SandboxPolicy's copy).
public let appleBackupPlist: [UInt8] = {
  var plist = Array("bplist00".utf8) + [0x5F, 0x10, 0x11] + Array("com.apple.backupd".utf8)
  plist += [0x08]  // offset table: the one object at offset 8
  plist += [0, 0, 0, 0, 0, 0, 1, 1]  // trailer: offset and reference sizes
  plist += [0, 0, 0, 0, 0, 0, 0, 1] + [0, 0, 0, 0, 0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 0x1c]
  return plist
}()
