import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// lookup/getattr/setattr: stat, chmod, chown, truncate, utimens, access, statfs.
@Suite("Attributes", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct AttributesTests {
  @Test("stat of a new file, fstat and the backing file agree")
  func statNewFile() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/new")
    try writeFile(path, bytes("12345"), mode: 0o640)
    let st = try statPath(path)
    #expect(fileType(st) == S_IFREG)
    #expect(st.st_mode & 0o7777 == 0o640)
    #expect(st.st_size == 5)
    #expect(st.st_nlink == 1)
    #expect(st.st_uid == getuid())
    #expect(st.st_gid == getgid())
    #expect(st.st_blksize > 0)
    let fd = try openFile(path, O_RDONLY)
    let fst = try fstatFD(fd)
    close(fd)
    #expect(fst.st_ino == st.st_ino)
    #expect(fst.st_size == st.st_size)
    #expect(try statPath(path).st_ino == st.st_ino, "inode number not stable across lookups")
    let backing = try statPath(fixture.backingPath("Documents/new"))
    #expect(backing.st_size == 5)
    #expect(backing.st_mode == st.st_mode)
    #expect(backing.st_mtim.tv_sec == st.st_mtim.tv_sec)
    #expect(backing.st_mtim.tv_nsec == st.st_mtim.tv_nsec)
    try fixture.unmount()
  }

  @Test("stat errors: ENOENT for a missing name, ENOTDIR through a file")
  func statErrors() throws {
    let fixture = try MountFixture.unlocked()
    var st = stat()
    #expect(errnoOf(stat(fixture.path("Documents/missing"), &st)) == ENOENT)
    #expect(errnoOf(lstat(fixture.path("Documents/missing/deeper"), &st)) == ENOENT)
    #expect(errnoOf(stat(fixture.path("nothing-at-root"), &st)) == ENOENT)
    try writeFile(fixture.path("Documents/file"), [])
    #expect(errnoOf(stat(fixture.path("Documents/file/x"), &st)) == ENOTDIR)
    try fixture.unmount()
  }

  @Test(
    "chmod and fchmod change the mode on the mount and in the backing file",
    arguments: [0o600, 0o755, 0o4755, 0o1777, 0o000])
  func chmodModes(mode: Int) throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/m")
    try writeFile(path, [])
    let ctimeBefore = try statPath(path).st_ctim
    #expect(chmod(path, mode_t(mode)) == 0)
    #expect(try statPath(path).st_mode & 0o7777 == mode_t(mode))
    #expect(try statPath(fixture.backingPath("Documents/m")).st_mode & 0o7777 == mode_t(mode))
    let after = try statPath(path).st_ctim
    #expect((after.tv_sec, after.tv_nsec) >= (ctimeBefore.tv_sec, ctimeBefore.tv_nsec))
    let fd = try openFile(path, O_RDONLY)
    #expect(fchmod(fd, 0o644) == 0)
    close(fd)
    #expect(try statPath(path).st_mode & 0o7777 == 0o644)
    try fixture.unmount()
  }

  @Test("chmod of a directory")
  func chmodDirectory() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/d")
    #expect(mkdir(path, 0o755) == 0)
    #expect(chmod(path, 0o2711) == 0)
    let st = try statPath(path)
    #expect(fileType(st) == S_IFDIR)
    #expect(st.st_mode & 0o7777 == 0o2711)
    try fixture.unmount()
  }

  @Test("chown as root to another uid/gid, by path, by fd and of a symlink itself (lchown)")
  func chownAsRoot() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/owned")
    try writeFile(path, bytes("x"))
    #expect(chown(path, 1234, 5678) == 0)
    var st = try statPath(path)
    #expect(st.st_uid == 1234)
    #expect(st.st_gid == 5678)
    let backing = try statPath(fixture.backingPath("Documents/owned"))
    #expect(backing.st_uid == 1234)
    #expect(backing.st_gid == 5678)
    // Only the group (uid -1 keeps the owner).
    #expect(chown(path, uid_t.max, 42) == 0)
    st = try statPath(path)
    #expect(st.st_uid == 1234)
    #expect(st.st_gid == 42)
    let fd = try openFile(path, O_RDONLY)
    #expect(fchown(fd, 99, 98) == 0)
    close(fd)
    st = try statPath(path)
    #expect(st.st_uid == 99)
    #expect(st.st_gid == 98)
    #expect(symlink("owned", fixture.path("Documents/link")) == 0)
    #expect(lchown(fixture.path("Documents/link"), 4321, 8765) == 0)
    let link = try lstatPath(fixture.path("Documents/link"))
    #expect(link.st_uid == 4321)
    #expect(link.st_gid == 8765)
    #expect(try statPath(path).st_uid == 99, "lchown followed the link")
    #expect(try lstatPath(fixture.backingPath("Documents/link")).st_uid == 4321)
    try fixture.unmount()
  }

  @Test("chown clears set-user-ID on a regular file")
  func chownClearsSetuid() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/suid")
    try writeFile(path, [])
    #expect(chmod(path, 0o4755) == 0)
    #expect(chown(path, 1000, 1000) == 0)
    #expect(try statPath(path).st_mode & 0o4000 == 0)
    try fixture.unmount()
  }

  @Test("truncate by path grows with zeros and shrinks")
  func truncateByPath() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/t")
    try writeFile(path, bytes("abcdef"))
    #expect(truncate(path, 10) == 0)
    #expect(try statPath(path).st_size == 10)
    #expect(try readFile(path) == bytes("abcdef") + [0, 0, 0, 0])
    #expect(truncate(path, 3) == 0)
    #expect(try statPath(path).st_size == 3)
    #expect(try readFile(path) == bytes("abc"))
    #expect(try readFile(fixture.backingPath("Documents/t")) == bytes("abc"))
    #expect(truncate(path, 0) == 0)
    #expect(try readFile(path) == [])
    #expect(errnoOf(truncate(fixture.path("Documents"), 0)) == EISDIR)
    #expect(errnoOf(truncate(path, -1)) == EINVAL)
    try fixture.unmount()
  }

  @Test("ftruncate by fd grows and shrinks an open file, reads see the new size")
  func truncateByFD() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Library/Caches/t")
    let fd = try openFile(path, O_RDWR | O_CREAT, 0o644)
    try writeAll(fd, pattern(10000, seed: 9))
    #expect(ftruncate(fd, 4000) == 0)
    #expect(try fstatFD(fd).st_size == 4000)
    #expect(try readAt(fd, count: 20000, offset: 0) == Array(pattern(10000, seed: 9)[..<4000]))
    #expect(ftruncate(fd, 1 << 20) == 0)
    #expect(try fstatFD(fd).st_size == 1 << 20)
    #expect(try readAt(fd, count: 100, offset: 5000) == [UInt8](repeating: 0, count: 100))
    close(fd)
    #expect(try statPath(fixture.backingPath("Library/Caches/t")).st_size == 1 << 20)
    let ro = try openFile(path, O_RDONLY)
    #expect(errnoOf(ftruncate(ro, 0)) == EINVAL)
    close(ro)
    try fixture.unmount()
  }

  @Test("utimensat with explicit times sets atime and mtime to the nanosecond")
  func utimensExplicit() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/times")
    try writeFile(path, bytes("x"))
    var times = [
      timespec(tv_sec: 1_000_000_000, tv_nsec: 123_456_789), timespec(tv_sec: 1_500_000_000, tv_nsec: 987_654_321),
    ]
    #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
    let st = try statPath(path)
    #expect(st.st_atim.tv_sec == 1_000_000_000)
    #expect(st.st_atim.tv_nsec == 123_456_789)
    #expect(st.st_mtim.tv_sec == 1_500_000_000)
    #expect(st.st_mtim.tv_nsec == 987_654_321)
    let backing = try statPath(fixture.backingPath("Documents/times"))
    #expect(backing.st_mtim.tv_sec == 1_500_000_000)
    #expect(backing.st_mtim.tv_nsec == 987_654_321)
    #expect(backing.st_atim.tv_sec == 1_000_000_000)
    try fixture.unmount()
  }

  @Test("UTIME_NOW sets the current time, UTIME_OMIT leaves a time unchanged")
  func utimensNowAndOmit() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/times")
    try writeFile(path, bytes("x"))
    var old = [timespec(tv_sec: 1_000_000_000, tv_nsec: 5), timespec(tv_sec: 1_100_000_000, tv_nsec: 7)]
    #expect(utimensat(AT_FDCWD, path, &old, 0) == 0)
    let start = time(nil)
    // atime now, mtime omitted.
    var times = [
      timespec(tv_sec: 0, tv_nsec: LinuxConstants.UTIME_NOW), timespec(tv_sec: 0, tv_nsec: LinuxConstants.UTIME_OMIT),
    ]
    #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
    var st = try statPath(path)
    #expect(st.st_atim.tv_sec >= start && st.st_atim.tv_sec <= time(nil) + 1)
    #expect(st.st_mtim.tv_sec == 1_100_000_000)
    #expect(st.st_mtim.tv_nsec == 7)
    // atime omitted, mtime now (through futimens on an open descriptor).
    var times2 = [
      timespec(tv_sec: 0, tv_nsec: LinuxConstants.UTIME_OMIT), timespec(tv_sec: 0, tv_nsec: LinuxConstants.UTIME_NOW),
    ]
    let savedAtime = st.st_atim
    let fd = try openFile(path, O_RDONLY)
    #expect(futimens(fd, &times2) == 0)
    close(fd)
    st = try statPath(path)
    #expect(st.st_atim.tv_sec == savedAtime.tv_sec)
    #expect(st.st_atim.tv_nsec == savedAtime.tv_nsec)
    #expect(st.st_mtim.tv_sec >= start && st.st_mtim.tv_sec <= time(nil) + 1)
    // Both omitted: nothing changes.
    var both = [
      timespec(tv_sec: 0, tv_nsec: LinuxConstants.UTIME_OMIT), timespec(tv_sec: 0, tv_nsec: LinuxConstants.UTIME_OMIT),
    ]
    let before = try statPath(path)
    #expect(utimensat(AT_FDCWD, path, &both, 0) == 0)
    let after = try statPath(path)
    #expect(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
    #expect(after.st_atim.tv_nsec == before.st_atim.tv_nsec)
    try fixture.unmount()
  }

  @Test("utimensat(NULL) sets both times to now; AT_SYMLINK_NOFOLLOW changes the link, not its target")
  func utimensNullAndSymlink() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/f")
    try writeFile(path, [])
    var old = [timespec(tv_sec: 1000, tv_nsec: 0), timespec(tv_sec: 2000, tv_nsec: 0)]
    #expect(utimensat(AT_FDCWD, path, &old, 0) == 0)
    let start = time(nil)
    #expect(utimensat(AT_FDCWD, path, nil, 0) == 0)
    var st = try statPath(path)
    #expect(st.st_mtim.tv_sec >= start)
    #expect(st.st_atim.tv_sec >= start)
    #expect(symlink("f", fixture.path("Documents/l")) == 0)
    #expect(utimensat(AT_FDCWD, path, &old, 0) == 0)
    var linkTimes = [timespec(tv_sec: 3000, tv_nsec: 0), timespec(tv_sec: 4000, tv_nsec: 0)]
    #expect(utimensat(AT_FDCWD, fixture.path("Documents/l"), &linkTimes, AT_SYMLINK_NOFOLLOW) == 0)
    #expect(try lstatPath(fixture.path("Documents/l")).st_mtim.tv_sec == 4000)
    st = try statPath(path)
    #expect(st.st_mtim.tv_sec == 2000)
    try fixture.unmount()
  }

  @Test("a write moves mtime and ctime forward")
  func writeUpdatesMtime() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/w")
    try writeFile(path, bytes("a"))
    var old = [timespec(tv_sec: 1000, tv_nsec: 0), timespec(tv_sec: 1000, tv_nsec: 0)]
    #expect(utimensat(AT_FDCWD, path, &old, 0) == 0)
    let fd = try openFile(path, O_WRONLY | O_APPEND)
    try writeAll(fd, bytes("b"))
    close(fd)
    let st = try statPath(path)
    #expect(st.st_mtim.tv_sec > 1000)
    #expect(try statPath(fixture.backingPath("Documents/w")).st_mtim.tv_sec > 1000)
    try fixture.unmount()
  }

  @Test("access(): F_OK/R_OK/W_OK, ENOENT for a missing name, X_OK refused without any x bit even for root")
  func accessChecks() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/a")
    try writeFile(path, [], mode: 0o644)
    #expect(access(path, F_OK) == 0)
    #expect(access(path, R_OK | W_OK) == 0)
    #expect(errnoOf(access(path, X_OK)) == EACCES)
    #expect(chmod(path, 0o744) == 0)
    #expect(access(path, X_OK) == 0)
    #expect(errnoOf(access(fixture.path("Documents/none"), F_OK)) == ENOENT)
    #expect(access(fixture.path("Documents"), R_OK | W_OK | X_OK) == 0)
    try fixture.unmount()
  }

  @Test("statvfs: sensible block size, counts and name length")
  func statfs() throws {
    let fixture = try MountFixture.unlocked()
    var info = statvfs()
    #expect(statvfs(fixture.path("Documents"), &info) == 0)
    #expect(info.f_bsize > 0)
    #expect(info.f_frsize > 0)
    #expect(info.f_blocks > 0)
    #expect(info.f_bfree <= info.f_blocks)
    #expect(info.f_bavail <= info.f_bfree)
    #expect(info.f_namemax >= 255)
    let fd = try openFile(fixture.path("Documents"), O_RDONLY | O_DIRECTORY)
    var byFD = statvfs()
    #expect(fstatvfs(fd, &byFD) == 0)
    close(fd)
    #expect(byFD.f_bsize == info.f_bsize)
    #expect(byFD.f_blocks == info.f_blocks)
    try fixture.unmount()
  }

  @Test("readdirplus: `ls -ln` shows what stat shows for every entry")
  func lsMatchesStat() throws {
    let fixture = try MountFixture.unlocked()
    let dir = fixture.path("Documents/listing")
    #expect(mkdir(dir, 0o750) == 0)
    for i in 0..<20 {
      let path = dir + "/file\(i)"
      try writeFile(path, [UInt8](repeating: 1, count: i * 100), mode: mode_t(0o600 + i % 8 * 0o10))
      #expect(chown(path, uid_t(1000 + i), gid_t(2000 + i)) == 0)
      var times = [
        timespec(tv_sec: 1_600_000_000 + i, tv_nsec: 0), timespec(tv_sec: 1_600_000_000 + i * 1000, tv_nsec: 0),
      ]
      #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
    }
    #expect(mkdir(dir + "/sub", 0o700) == 0)
    #expect(symlink("file1", dir + "/link") == 0)
    let output = try Command.shell("ls -lna --time-style=+%s " + shellQuote(dir))
    var seen = 0
    for line in output.split(separator: "\n") where !line.hasPrefix("total") {
      let fields = line.split(separator: " ", omittingEmptySubsequences: true)
      guard fields.count >= 7 else { continue }
      let name = String(fields[6])
      if name == "." || name == ".." { continue }
      let st = try lstatPath(dir + "/" + name)
      #expect(fields[1] == "\(st.st_nlink)", "\(name) nlink")
      #expect(fields[2] == "\(st.st_uid)", "\(name) uid")
      #expect(fields[3] == "\(st.st_gid)", "\(name) gid")
      #expect(fields[4] == "\(st.st_size)", "\(name) size")
      #expect(fields[5] == "\(st.st_mtim.tv_sec)", "\(name) mtime")
      let typeChar: Character = fileType(st) == S_IFDIR ? "d" : fileType(st) == S_IFLNK ? "l" : "-"
      #expect(fields[0].first == typeChar, "\(name) type")
      seen += 1
    }
    #expect(seen == 22)
    try fixture.unmount()
  }
}
