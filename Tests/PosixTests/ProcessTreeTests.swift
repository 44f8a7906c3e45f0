import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Processes in sight")
struct ProcessTreeTests {
  @Test("directories in use: a /proc that cannot be listed is an error, not an empty set")
  func procUnlistable() {
    SyscallFaults.inject([.openat: SyscallFault(.accessDenied, name: "/proc")]) { _ in
      #expect(throws: Errno.accessDenied) { try Sys.directoriesInUse(under: "/nonexistent") }
    }
  }

  @Test("directories in use: this process's working directory, when it is under the path")
  func ownWorkingDirectory() throws {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
    let cwd = try #require(getcwd(&buffer, buffer.count).map { String(cString: $0) })
    var st = stat()
    #expect(stat(cwd, &st) == 0)
    #expect(try Sys.directoriesInUse(under: cwd).contains(UInt64(st.st_ino)))
  }
}
