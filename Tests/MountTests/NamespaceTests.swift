import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// mkdir, unlink, rmdir, symlink, readlink, rename (incl. renameat2 flags), link, mknod.
@Suite("Namespace", .needsFUSE, .serialized, .timeLimit(.minutes(10)))
struct NamespaceTests {
  // MARK: - mkdir, unlink, rmdir

  @Test("mkdir creates a directory (mode honoured), EEXIST on a second mkdir, ENOENT without a parent")
  func mkdirBasics() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Library/Application Support/dir")
    #expect(mkdir(path, 0o751) == 0)
    let st = try statPath(path)
    #expect(fileType(st) == S_IFDIR)
    #expect(st.st_mode & 0o777 == 0o751 & ~0o022 || st.st_mode & 0o777 == 0o751)
    #expect(st.st_nlink == 2)
    #expect(fileType(try statPath(fixture.backingPath("Library/Application Support/dir"))) == S_IFDIR)
    #expect(errnoOf(mkdir(path, 0o755)) == EEXIST)
    try writeFile(fixture.path("Documents/file"), [])
    #expect(errnoOf(mkdir(fixture.path("Documents/file"), 0o755)) == EEXIST)
    #expect(errnoOf(mkdir(fixture.path("Documents/a/b"), 0o755)) == ENOENT)
    #expect(errnoOf(mkdir(fixture.path("Documents/file/b"), 0o755)) == ENOTDIR)
    #expect(mkdir(path + "/child", 0o755) == 0)
    #expect(try statPath(path).st_nlink == 3, "a subdirectory adds a link to its parent")
    try fixture.unmount()
  }

  @Test("unlink removes a file; ENOENT when missing, EISDIR on a directory")
  func unlinkBasics() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("Documents/gone")
    try writeFile(path, bytes("x"))
    #expect(unlink(path) == 0)
    #expect(errnoOf(access(path, F_OK)) == ENOENT)
    #expect(errnoOf(access(fixture.backingPath("Documents/gone"), F_OK)) == ENOENT)
    #expect(errnoOf(unlink(path)) == ENOENT)
    #expect(mkdir(fixture.path("Documents/d"), 0o755) == 0)
    #expect(errnoOf(unlink(fixture.path("Documents/d"))) == EISDIR)
    #expect(fileType(try statPath(fixture.path("Documents/d"))) == S_IFDIR)
    try fixture.unmount()
  }

  @Test("unlinked files are freed in the backing filesystem once the mount is idle")
  func unlinkedFilesAreFreed() throws {
    // The daemon defers the close that frees an unlinked file (its forget) until after its
    // next reply, or until no request is waiting: none may stay open while the mount idles.
    let fixture = try MountFixture.unlocked()
    for index in 0..<20 { try writeFile(fixture.path("Documents/f\(index)"), bytes("x")) }
    for index in 0..<20 { #expect(unlink(fixture.path("Documents/f\(index)")) == 0) }
    let deleted = {
      (try? MountFixture.descriptors(ofMount: fixture.mountpoint))?.map(\.target).filter { $0.hasSuffix(" (deleted)") }
        ?? ["(cannot list the daemon's descriptors)"]
    }
    #expect(fixture.waitUntil(seconds: 5) { deleted().isEmpty }, "the daemon still holds unlinked files: \(deleted())")
    try fixture.unmount()
  }

  @Test("rmdir: ENOTEMPTY with an entry, ENOENT when missing, ENOTDIR on a file, succeeds when empty")
  func rmdirErrors() throws {
    let fixture = try MountFixture.unlocked()
    let dir = fixture.path("Documents/d")
    #expect(mkdir(dir, 0o755) == 0)
    try writeFile(dir + "/inside", [])
    #expect(errnoOf(rmdir(dir)) == ENOTEMPTY)
    #expect(fileType(try statPath(dir)) == S_IFDIR)
    #expect(errnoOf(rmdir(fixture.path("Documents/missing"))) == ENOENT)
    #expect(errnoOf(rmdir(dir + "/inside")) == ENOTDIR)
    #expect(errnoOf(rmdir(dir + "/.")) == EINVAL)
    #expect(unlink(dir + "/inside") == 0)
    #expect(rmdir(dir) == 0)
    #expect(errnoOf(access(dir, F_OK)) == ENOENT)
    #expect(errnoOf(access(fixture.backingPath("Documents/d"), F_OK)) == ENOENT)
    try fixture.unmount()
  }

  // MARK: - symlink, readlink

  @Test("a relative symlink: lstat shows a link, readlink its target, stat and open follow it")
  func relativeSymlink() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/target"), bytes("content"))
    #expect(symlink("target", fixture.path("Documents/link")) == 0)
    let link = try lstatPath(fixture.path("Documents/link"))
    #expect(fileType(link) == S_IFLNK)
    #expect(link.st_size == 6)
    #expect(try readLink(fixture.path("Documents/link")) == "target")
    #expect(fileType(try statPath(fixture.path("Documents/link"))) == S_IFREG)
    #expect(try readFile(fixture.path("Documents/link")) == bytes("content"))
    #expect(errnoOf(symlink("other", fixture.path("Documents/link"))) == EEXIST)
    var buffer = [CChar](repeating: 0, count: 64)
    #expect(errnoOf(readlink(fixture.path("Documents/target"), &buffer, 64)) == EINVAL)
    // A short buffer truncates.
    #expect(readlink(fixture.path("Documents/link"), &buffer, 3) == 3)
    try fixture.unmount()
  }

  @Test("a dangling symlink: lstat works, stat and open give ENOENT; a long target round-trips")
  func danglingAndLongSymlink() throws {
    let fixture = try MountFixture.unlocked()
    #expect(symlink("nowhere/at/all", fixture.path("Documents/dangling")) == 0)
    #expect(fileType(try lstatPath(fixture.path("Documents/dangling"))) == S_IFLNK)
    var st = stat()
    #expect(errnoOf(stat(fixture.path("Documents/dangling"), &st)) == ENOENT)
    #expect(errnoOf(open(fixture.path("Documents/dangling"), O_RDONLY)) == ENOENT)
    let longTarget = String(repeating: "abcdefghi/", count: 300)  // 3000 bytes
    #expect(symlink(longTarget, fixture.path("Documents/long")) == 0)
    #expect(try readLink(fixture.path("Documents/long")) == longTarget)
    #expect(try lstatPath(fixture.path("Documents/long")).st_size == 3000)
    try fixture.unmount()
  }

  // MARK: - rename

  @Test("rename to a new name keeps the inode and the content")
  func renamePlain() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/a"), bytes("A"))
    let ino = try statPath(fixture.path("Documents/a")).st_ino
    #expect(rename(fixture.path("Documents/a"), fixture.path("Documents/b")) == 0)
    #expect(errnoOf(access(fixture.path("Documents/a"), F_OK)) == ENOENT)
    #expect(try statPath(fixture.path("Documents/b")).st_ino == ino)
    #expect(try readFile(fixture.path("Documents/b")) == bytes("A"))
    #expect(try directoryNames(fixture.backingPath("Documents")) == ["b"])
    #expect(errnoOf(rename(fixture.path("Documents/a"), fixture.path("Documents/c"))) == ENOENT)
    try fixture.unmount()
  }

  @Test("rename over an existing file replaces it")
  func renameOverExisting() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/new"), bytes("new"))
    try writeFile(fixture.path("Documents/old"), bytes("old content"))
    let fd = try openFile(fixture.path("Documents/old"), O_RDONLY)
    #expect(rename(fixture.path("Documents/new"), fixture.path("Documents/old")) == 0)
    #expect(try readFile(fixture.path("Documents/old")) == bytes("new"))
    #expect(try directoryNames(fixture.path("Documents")) == ["old"])
    #expect(try readFile(fixture.backingPath("Documents/old")) == bytes("new"))
    // The replaced file is still readable through its open descriptor.
    #expect(try readAt(fd, count: 100, offset: 0) == bytes("old content"))
    close(fd)
    try fixture.unmount()
  }

  @Test("rename of directories: into a subdirectory, over an empty dir, ENOTEMPTY, EISDIR, ENOTDIR, EINVAL into itself")
  func renameDirectories() throws {
    let fixture = try MountFixture.unlocked()
    #expect(mkdir(fixture.path("Documents/src"), 0o755) == 0)
    #expect(mkdir(fixture.path("Documents/parent"), 0o755) == 0)
    try writeFile(fixture.path("Documents/src/f"), bytes("f"))
    #expect(rename(fixture.path("Documents/src"), fixture.path("Documents/parent/moved")) == 0)
    #expect(try readFile(fixture.path("Documents/parent/moved/f")) == bytes("f"))
    #expect(try readFile(fixture.backingPath("Documents/parent/moved/f")) == bytes("f"))
    #expect(mkdir(fixture.path("Documents/empty"), 0o755) == 0)
    #expect(rename(fixture.path("Documents/parent/moved"), fixture.path("Documents/empty")) == 0)
    #expect(try directoryNames(fixture.path("Documents/empty")) == ["f"])
    #expect(mkdir(fixture.path("Documents/other"), 0o755) == 0)
    #expect(errnoOf(rename(fixture.path("Documents/other"), fixture.path("Documents/empty"))) == ENOTEMPTY)
    try writeFile(fixture.path("Documents/file"), [])
    #expect(errnoOf(rename(fixture.path("Documents/file"), fixture.path("Documents/other"))) == EISDIR)
    #expect(errnoOf(rename(fixture.path("Documents/other"), fixture.path("Documents/file"))) == ENOTDIR)
    #expect(errnoOf(rename(fixture.path("Documents/empty"), fixture.path("Documents/empty/inner"))) == EINVAL)
    try fixture.unmount()
  }

  @Test("RENAME_NOREPLACE: EEXIST over an existing name (both unchanged), succeeds to a new name")
  func renameNoReplace() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/a"), bytes("A"))
    try writeFile(fixture.path("Documents/b"), bytes("B"))
    let result = Libc.renameat2(
      AT_FDCWD, fixture.path("Documents/a"), AT_FDCWD, fixture.path("Documents/b"), LinuxConstants.RENAME_NOREPLACE)
    #expect(errnoOf(result) == EEXIST)
    #expect(try readFile(fixture.path("Documents/a")) == bytes("A"))
    #expect(try readFile(fixture.path("Documents/b")) == bytes("B"))
    #expect(
      Libc.renameat2(
        AT_FDCWD, fixture.path("Documents/a"), AT_FDCWD, fixture.path("Documents/c"), LinuxConstants.RENAME_NOREPLACE)
        == 0)
    #expect(try directoryNames(fixture.path("Documents")) == ["b", "c"])
    #expect(try directoryNames(fixture.backingPath("Documents")) == ["b", "c"])
    try fixture.unmount()
  }

  @Test("RENAME_EXCHANGE swaps two files (and a file with a directory) in one domain; ENOENT when one is missing")
  func renameExchange() throws {
    let fixture = try MountFixture.unlocked()
    #expect(mkdir(fixture.path("Documents/sub"), 0o755) == 0)
    try writeFile(fixture.path("Documents/a"), bytes("A"))
    try writeFile(fixture.path("Documents/sub/b"), bytes("BB"))
    let inoA = try statPath(fixture.path("Documents/a")).st_ino
    #expect(
      Libc.renameat2(
        AT_FDCWD, fixture.path("Documents/a"), AT_FDCWD, fixture.path("Documents/sub/b"), LinuxConstants.RENAME_EXCHANGE
      )
        == 0)
    #expect(try readFile(fixture.path("Documents/a")) == bytes("BB"))
    #expect(try readFile(fixture.path("Documents/sub/b")) == bytes("A"))
    #expect(try statPath(fixture.path("Documents/sub/b")).st_ino == inoA)
    #expect(try readFile(fixture.backingPath("Documents/a")) == bytes("BB"))
    #expect(try readFile(fixture.backingPath("Documents/sub/b")) == bytes("A"))
    #expect(mkdir(fixture.path("Documents/dir"), 0o755) == 0)
    #expect(
      Libc.renameat2(
        AT_FDCWD, fixture.path("Documents/a"), AT_FDCWD, fixture.path("Documents/dir"), LinuxConstants.RENAME_EXCHANGE)
        == 0)
    #expect(fileType(try statPath(fixture.path("Documents/a"))) == S_IFDIR)
    #expect(try readFile(fixture.path("Documents/dir")) == bytes("BB"))
    let missing = Libc.renameat2(
      AT_FDCWD, fixture.path("Documents/a"), AT_FDCWD, fixture.path("Documents/none"), LinuxConstants.RENAME_EXCHANGE)
    #expect(errnoOf(missing) == ENOENT)
    try fixture.unmount()
  }

  @Test("RENAME_EXCHANGE through Python ctypes (renameat2 from libc)")
  func renameExchangePython() throws {
    let fixture = try MountFixture.unlocked()
    try writeFile(fixture.path("Documents/x"), bytes("X"))
    try writeFile(fixture.path("Documents/y"), bytes("Y"))
    let script = """
      import ctypes, os, sys
      libc = ctypes.CDLL(None, use_errno=True)
      r = libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2)
      print(r, ctypes.get_errno())
      """
    let result = try Command.run("python3", ["-c", script, fixture.path("Documents/x"), fixture.path("Documents/y")])
    #expect(result.output.trimmingCharacters(in: .whitespacesAndNewlines) == "0 0", "\(result.error)")
    #expect(try readFile(fixture.path("Documents/x")) == bytes("Y"))
    #expect(try readFile(fixture.path("Documents/y")) == bytes("X"))
    try fixture.unmount()
  }

  // MARK: - link

  @Test("link errors: a directory gives EPERM, a missing source ENOENT")
  func linkErrors() throws {
    let fixture = try MountFixture.unlocked()
    #expect(mkdir(fixture.path("Documents/d"), 0o755) == 0)
    #expect(errnoOf(link(fixture.path("Documents/d"), fixture.path("Documents/d2"))) == EPERM)
    #expect(errnoOf(link(fixture.path("Documents/none"), fixture.path("Documents/x"))) == ENOENT)
    try fixture.unmount()
  }

  // MARK: - mknod

  @Test("mkfifo: a FIFO node passes data between a reader and a writer")
  func fifo() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("tmp/fifo")
    #expect(mkfifo(path, 0o600) == 0)
    #expect(fileType(try statPath(path)) == S_IFIFO)
    #expect(fileType(try lstatPath(fixture.backingPath("tmp/fifo"))) == S_IFIFO)
    let reader = try openFile(path, O_RDONLY | O_NONBLOCK)
    let writer = try openFile(path, O_WRONLY | O_NONBLOCK)
    try writeAll(writer, bytes("through the pipe"))
    close(writer)
    #expect(try readAt(reader, count: 0, offset: 0) == [])
    var buffer = [UInt8](repeating: 0, count: 64)
    let n = read(reader, &buffer, 64)
    #expect(n == 16)
    #expect(Array(buffer[..<max(n, 0)]) == bytes("through the pipe"))
    close(reader)
    #expect(errnoOf(mkfifo(path, 0o600)) == EEXIST)
    try fixture.unmount()
  }

  @Test("bind a unix socket in the mount: the node is a socket, a client can connect and talk")
  func unixSocket() throws {
    let fixture = try MountFixture.unlocked()
    let path = fixture.path("tmp/sock")
    let server = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    #expect(server >= 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let pathBytes = Array(path.utf8)
    try #require(pathBytes.count < MemoryLayout.size(ofValue: address.sun_path))
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      raw.copyBytes(from: pathBytes)
    }
    let length = socklen_t(MemoryLayout<sockaddr_un>.size)
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(server, $0, length) }
    }
    #expect(errnoOf(bound) == 0)
    #expect(listen(server, 1) == 0)
    #expect(fileType(try lstatPath(path)) == S_IFSOCK)
    #expect(fileType(try lstatPath(fixture.backingPath("tmp/sock"))) == S_IFSOCK)
    let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) }
    }
    #expect(errnoOf(connected) == 0)
    let accepted = accept(server, nil, nil)
    #expect(accepted >= 0)
    try writeAll(client, bytes("ping"))
    var buffer = [UInt8](repeating: 0, count: 4)
    #expect(read(accepted, &buffer, 4) == 4)
    #expect(buffer == bytes("ping"))
    close(accepted)
    close(client)
    close(server)
    #expect(unlink(path) == 0)
    try fixture.unmount()
  }
}
