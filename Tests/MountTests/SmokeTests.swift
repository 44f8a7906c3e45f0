import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Mount smoke", .needsFUSE, .timeLimit(.minutes(10)))
struct SmokeTests {
  @Test("mount shows the layout, a file round-trips, unmount is clean")
  func layoutAndRoundTrip() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    for directory in ["Documents", "Library/Application Support", "Library/Preferences", "Library/Caches", "tmp"] {
      var isDirectory: ObjCBool = false
      #expect(FileManager.default.fileExists(atPath: fixture.path(directory), isDirectory: &isDirectory))
      #expect(isDirectory.boolValue, "\(directory)")
    }
    try Data("hello".utf8).write(to: URL(fileURLWithPath: fixture.path("Documents/a.txt")))
    #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.backingPath("Documents/a.txt"))) == Data("hello".utf8))
    try fixture.unmount()
  }
}
