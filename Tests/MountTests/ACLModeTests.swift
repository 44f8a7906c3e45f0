import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// POSIX ACLs against a plain directory: a mode changed through an access ACL shows at
/// once (the kernel caches attributes for 60 s), set-group-ID goes as on ext4 when an
/// owner outside the file's group changes the ACL or the mode, for files and directories,
/// as root and as another user; and an ACL that denies a user denies them on the mount.
@Suite("POSIX ACLs and the mode", .needsFUSE, .timeLimit(.minutes(10)))
struct ACLModeTests {
  /// Runs in directory `$1` as root; `as_other` runs a command as uid 65534 (no
  /// supplementary groups). Each line: what was done, then the mode `stat` shows right
  /// after (on the mount, from the kernel's cache while it is valid).
  static let script = #"""
    set -u
    dir=$1
    as_other() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
    make() {  # make KIND PATH OWNER GROUP MODE
      rm -rf "$2"
      if [ "$1" = file ]; then as_other touch "$2"; else as_other mkdir "$2"; fi
      chown "$3:$4" "$2"
      chmod "$5" "$2"
      stat -c %a "$2" > /dev/null  # the kernel caches the attributes now
    }
    show() { echo "$1: $(stat -c %a "$2") $(getfacl -cp "$2" 2>&1 | tr '\n' ' ')"; }
    for kind in file dir; do
      p=$dir/$kind
      make $kind "$p" 0 0 750
      setfacl -m u::rwx,g::rwx,o::rwx "$p"; show "$kind: root's ACL widens the mode" "$p"
      make $kind "$p" 65534 65534 750
      as_other setfacl -m u::rwx,g::rwx,o::rwx "$p"; show "$kind: the owner's ACL widens the mode" "$p"
      as_other setfacl -m u::r-x,g::---,o::--- "$p"; show "$kind: the owner's ACL narrows the mode" "$p"
      make $kind "$p" 65534 0 2755
      as_other setfacl -m u::rwx,g::rwx,o::rwx "$p"; show "$kind: ACL by an owner outside the group" "$p"
      make $kind "$p" 65534 0 2755
      as_other setfacl -m u:0:r "$p"; show "$kind: named entry by an owner outside the group" "$p"
      make $kind "$p" 65534 0 2755
      as_other setfacl -b "$p"; show "$kind: ACL removed by an owner outside the group" "$p"
      make $kind "$p" 65534 0 2755
      setfacl -m u::rwx,g::rwx,o::rwx "$p"; show "$kind: root's ACL keeps set-group-ID" "$p"
      make $kind "$p" 65534 65534 2755
      as_other setfacl -m u::rwx,g::rwx,o::rwx "$p"; show "$kind: a member's ACL keeps set-group-ID" "$p"
      make $kind "$p" 65534 0 755
      as_other chmod 2775 "$p"; show "$kind: chmod g+s by an owner outside the group" "$p"
      make $kind "$p" 65534 65534 755
      as_other chmod 2775 "$p"; show "$kind: chmod g+s by a member" "$p"
      make $kind "$p" 65534 65534 640
      as_other setfacl -m u:0:rwx "$p"; as_other chmod 600 "$p"; show "$kind: chmod narrows the ACL's mask" "$p"
      as_other setfacl -m m::rwx "$p"; show "$kind: the mask widens the mode" "$p"
      make $kind "$p" 0 0 755
      as_other setfacl -m u::r-- "$p" 2>/dev/null || echo "$kind: refused to someone else"
      show "$kind: someone else's ACL changes nothing" "$p"
    done
    """#

  func lines(in directory: String) throws -> [String] {
    let result = try Command.run("/bin/bash", ["-c", Self.script, "acl", directory])
    #expect(result.status == 0, "\(result.error)")
    return result.output.split(separator: "\n").map(String.init)
  }

  @Test("ACL writes and chmod change the mode as on a local filesystem, visible at once")
  func modeAfterACLWrites() throws {
    let fixture = try MountFixture.unlocked(["-o", "allow_other"])
    try check(chmod(fixture.root, 0o755), "chmod fixture root")
    let plain = fixture.root + "/plain"
    let mounted = fixture.path("Documents/acl")
    for directory in [plain, mounted] {
      try check(mkdir(directory, 0o777), "mkdir \(directory)")
      try check(chmod(directory, 0o1777), "chmod \(directory)")
    }
    let expected = try lines(in: plain)
    // The plain directory is the reference; a few of its answers, to be sure of it.
    #expect(expected.contains { $0.hasPrefix("file: ACL by an owner outside the group: 777 ") })
    #expect(expected.contains { $0.hasPrefix("dir: root's ACL keeps set-group-ID: 2777 ") })
    #expect(expected.count == 28, "\(expected)")
    let actual = try lines(in: mounted)
    for (local, mount) in zip(expected, actual) { #expect(mount == local) }
    #expect(actual.count == expected.count)
    try fixture.unmount()
  }

  /// Runs in directory `$1` as root: files whose ACL gives uid 65534 less than their mode
  /// bits alone would, and what 65534 may do with them.
  static let deniedScript = #"""
    set -u
    dir=$1
    as_other() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
    try() { if as_other "$@" > /dev/null 2>&1; then echo allowed; else echo denied; fi; }
    f=$dir/named; echo secret > "$f"; chmod 644 "$f"; setfacl -m u:65534:--- "$f"
    echo "a named entry denies the user: read $(try cat "$f"), write $(try sh -c "echo x >> $f")"
    f=$dir/group; echo secret > "$f"; chgrp 65534 "$f"; chmod 640 "$f"; setfacl -m g::---,u:0:rwx "$f"
    echo "the group entry is narrower than the mask: read $(try cat "$f")"
    f=$dir/mask; echo secret > "$f"; chmod 600 "$f"; setfacl -m u:65534:rw "$f"
    echo "a named entry allows the user: read $(try cat "$f"), write $(try sh -c "echo x >> $f")"
    chmod 600 "$f"
    echo "chmod empties the mask: read $(try cat "$f"), write $(try sh -c "echo x >> $f")"
    d=$dir/closed; mkdir "$d"; echo secret > "$d/f"; chmod 755 "$d"; chmod 644 "$d/f"; setfacl -m u:65534:r-- "$d"
    echo "a directory's named entry without search: reach $(try cat "$d/f"), list $(try ls "$d")"
    """#

  @Test("an ACL that denies a user on the backing directory denies them on the mount")
  func aclsDeny() throws {
    let fixture = try MountFixture.unlocked(["-o", "allow_other"])
    try check(chmod(fixture.root, 0o755), "chmod fixture root")
    let plain = fixture.root + "/plain"
    let mounted = fixture.path("Documents/acl")
    var outputs: [[String]] = []
    for directory in [plain, mounted] {
      try check(mkdir(directory, 0o755), "mkdir \(directory)")
      let result = try Command.run("/bin/bash", ["-c", Self.deniedScript, "acl", directory])
      #expect(result.status == 0, "\(result.error)")
      outputs.append(result.output.split(separator: "\n").map(String.init))
    }
    #expect(outputs[0].first == "a named entry denies the user: read denied, write denied", "\(outputs[0])")
    #expect(outputs[0].count == 5)
    for (local, mount) in zip(outputs[0], outputs[1]) { #expect(mount == local) }
    try fixture.unmount()
  }
}
