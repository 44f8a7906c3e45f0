// An NFS export of a sandbox: NFS-Ganesha's VFS backend serves the mount by file handles
// (name_to_handle_at once, open_by_handle_at from then on), and libnfs's command-line
// client writes and reads through it, over NFSv4 on the loopback. Both run in user space:
// the kernel of the machines this project runs on has neither nfsd nor an NFS client.
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

extension Trait where Self == ConditionTrait {
  /// NFS-Ganesha and libnfs's tools (scripts/install-deps.sh installs them).
  static var needsGanesha: Self {
    .enabled(
      if: ["/usr/bin/ganesha.nfsd", "/usr/bin/nfs-cp", "/usr/bin/nfs-cat"].allSatisfy {
        FileManager.default.isExecutableFile(atPath: $0)
      } || ProcessInfo.processInfo.environment["CI"] != nil,  // in CI: fail, never skip
      "needs nfs-ganesha, nfs-ganesha-vfs and libnfs-utils")
  }
}

@Suite("NFS export", .needsFUSE, .needsGanesha, .needsHandleCapability, .timeLimit(.minutes(5)))
struct NFSExportTests {
  @Test("a file written through an NFS export of the sandbox reads back through NFS, the mount and the backing")
  func writeAndReadThroughNFS() throws {
    try HandleTool.requireCapability()
    let fixture = try MountFixture(arguments: ["--unlocked"], backingOnTmpfs: true)
    let port = 20_000 + Int(getpid() % 9_000)
    let configuration = fixture.root + "/ganesha.conf"
    try Data(
      """
      NFS_CORE_PARAM { Protocols = 4; NFS_Port = \(port); Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
      NFSV4 { Graceless = true; }
      EXPORT {
        Export_Id = 7; Path = \(fixture.mountpoint); Pseudo = /sandbox; Access_Type = RW; Squash = No_Root_Squash;
        Protocols = 4; Transports = TCP; SecType = sys; FSAL { Name = VFS; }
      }
      """.utf8
    ).write(to: URL(fileURLWithPath: configuration))
    let server = Process()
    server.executableURL = URL(fileURLWithPath: "/usr/bin/ganesha.nfsd")
    server.arguments = [
      "-F", "-f", configuration, "-L", fixture.root + "/ganesha.log", "-p", fixture.root + "/ganesha.pid", "-N",
      "NIV_EVENT",
    ]
    server.standardOutput = FileHandle.nullDevice
    server.standardError = FileHandle.nullDevice
    try server.run()
    let stop = {
      guard server.isRunning else { return }
      server.terminate()
      if !fixture.waitUntil(seconds: 10, { !server.isRunning }) { kill(server.processIdentifier, SIGKILL) }
      server.waitUntilExit()
    }
    defer { stop() }
    let url = { (path: String) in "nfs://127.0.0.1/sandbox/\(path)?version=4&nfsport=\(port)" }
    var listing = CommandResult(status: -1, output: "", error: "")
    let served = fixture.waitUntil(seconds: 30) {
      listing = (try? Command.run("/usr/bin/nfs-ls", [url("Documents")])) ?? listing
      return listing.status == 0
    }
    try #require(served, "the export never answered: \(listing.error)")

    let text = "written through NFS \(UUID())\n"
    let local = fixture.root + "/in.txt"
    try Data(text.utf8).write(to: URL(fileURLWithPath: local))
    let copy = try Command.run("/usr/bin/nfs-cp", [local, url("Documents/nfs.txt")])
    #expect(copy.status == 0, "nfs-cp: \(copy.error)")
    #expect(try Command.run("/usr/bin/nfs-cat", [url("Documents/nfs.txt")]).output == text)
    #expect(try String(contentsOfFile: fixture.path("Documents/nfs.txt"), encoding: .utf8) == text)
    #expect(try String(contentsOfFile: fixture.backingPath("Documents/nfs.txt"), encoding: .utf8) == text)
    // Once the kernel dropped what it could, the server finds the file by its handle.
    _ = HandleTool.evict(fixture, downTo: 8)
    #expect(try Command.run("/usr/bin/nfs-cat", [url("Documents/nfs.txt")]).output == text)
    let names = try Command.run("/usr/bin/nfs-ls", [url("Documents")]).output
    #expect(names.contains("nfs.txt"), "\(names)")
    stop()  // it holds descriptors on the mount
    try fixture.unmount()
  }
}
