import Posix
import Testing

@testable import AppBoxBackup

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Targets, staging directories, trees removed")
struct DirectoryTests {
  @Test("targets resolve from what a shell user types: '.', './', trailing slashes, '..', symlinks")
  func targets() throws {
    let scratch = try Scratch()
    try Sys.mkdir(scratch("empty"), 0o755)
    try Sys.mkdir(scratch("sub"), 0o755)
    #expect(symlink(scratch("empty"), scratch("link")) == 0)
    let root = try Sys.realpath(scratch.path)
    let cases: [(String, String, String, Bool)] = [
      (scratch("empty"), root, "empty", true), (scratch("empty/"), root, "empty", true),
      (scratch("empty/."), root, "empty", true), (scratch("sub/../empty//"), root, "empty", true),
      (scratch("link"), root, "empty", true), (scratch("new"), root, "new", false),
      (scratch("new/"), root, "new", false),
      (scratch("sub/new"), root + "/sub", "new", false),
    ]
    for (argument, parent, name, existed) in cases {
      let target = try TargetDirectory.resolve(argument, option: "--to")
      #expect(
        target.parent == parent && target.name == name && target.existed == existed,
        "\(argument): \(target.parent), \(target.name), \(target.existed)")
      #expect(target.path == parent + "/" + name)
    }
    #expect(try TargetDirectory.resolve("/tmp", option: "--to").path == "/tmp")
  }

  @Test("targets that name nothing a command could make are errors, never crashes")
  func badTargets() throws {
    let scratch = try Scratch()
    try Scratch.write(scratch("file"), [1])
    #expect(symlink(scratch("nowhere"), scratch("dangling")) == 0)
    let cases: [(String, BackupError.Kind, String)] = [
      ("", .usage, "empty"), ("a\0b", .usage, "NUL"), ("/", .unusablePath, "root directory"),
      (scratch("file"), .unusablePath, "not a directory"), (scratch("file/x"), .unusablePath, "not a directory"),
      (scratch("dangling"), .unusablePath, "symlink to nothing"),
      (scratch("missing/x"), .unusablePath, "does not exist"),
      (scratch("missing/.."), .unusablePath, "does not exist"),
      (scratch(String(repeating: "n", count: 256)), .unusablePath, "too long"),
      (String(repeating: "p/", count: 2100), .unusablePath, "too long"),
    ]
    for (argument, kind, message) in cases {
      #expect {
        try TargetDirectory.resolve(argument, option: "--to")
      } throws: { error in
        guard let error = error as? BackupError else { return false }
        return error.kind == kind && error.message.contains(message)
      }
    }
  }

  @Test("a staging directory is 0700 and the user's, replaces an empty target on commit, and is removed on discard")
  func staging() throws {
    let scratch = try Scratch()
    try Sys.mkdir(scratch("target"), 0o755)
    let target = try TargetDirectory.resolve(scratch("target"), option: "--to")
    let staging = try StagingDirectory(for: target, purpose: "test", verb: "test")
    #expect(try Sys.fstat(staging.fd).st_mode & 0o7777 == 0o700)
    #expect(staging.name.hasPrefix(".target.appbox-test-"))
    try Scratch.write(staging.path + "/inside", [1])
    try staging.commit()
    #expect(try Scratch.names(scratch.path) == ["target"])
    #expect(try Scratch.names(scratch("target")) == ["inside"])
    #expect(try Sys.statPath(scratch("target")).st_mode & 0o7777 == 0o700)
    #expect(staging.discard() == nil, "a committed directory stays")
    // A target with something in it is refused before anything is made.
    #expect(throws: BackupError.self) { try StagingDirectory(for: target, purpose: "test", verb: "test") }
    let other = try StagingDirectory(
      for: TargetDirectory.resolve(scratch("other"), option: "--to"), purpose: "x", verb: "x")
    try Sys.mkdir(other.path + "/closed", 0o755)
    try Scratch.write(other.path + "/closed/f", [2])
    try Sys.chmod(other.path + "/closed", 0)
    #expect(other.discard() == nil)
    #expect(try Scratch.names(scratch.path) == ["target"])
  }

  @Test("a tree 3,000 levels deep is removed without recursion; symlinks in it are removed, not followed")
  func removeDeepTree() throws {
    let scratch = try Scratch()
    try Sys.mkdir(scratch("keep"), 0o755)
    try Scratch.write(scratch("keep/f"), [1])
    try Sys.mkdir(scratch("tree"), 0o755)
    var fd = try Sys.open(scratch("tree"), O_RDONLY | O_DIRECTORY)
    for _ in 0..<3000 {
      let next = try Directory.make(fd, "d", mode: 0o755)
      Sys.close(fd)
      fd = next
    }
    try Sys.symlinkat(scratch("keep"), fd, "link")
    Sys.close(fd)
    try Directory.removeTree(AT_FDCWD, Array(scratch("tree").utf8CString))
    #expect(try Scratch.names(scratch.path) == ["keep"])
    #expect(try Scratch.names(scratch("keep")) == ["f"])
  }
}
