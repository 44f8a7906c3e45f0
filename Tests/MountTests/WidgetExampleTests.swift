import Foundation
import Testing

/// Examples/TimelineApp and TimelineWidget on a device mount: an app shares a file with
/// its widget through an App Group; a class-A file fails the widget while the device is
/// locked, and class C, the developer's fix, works (docs/reference.md#appbox-run-and-appboxkit).
@Suite("The app and widget example on a device", .needsFUSE, .serialized, .timeLimit(.minutes(5)))
struct WidgetExampleTests {
  static let (app, widget, group) = (
    "com.example.timeline", "com.example.timeline.widget", "group.com.example.timeline"
  )

  /// Runs `program` (an example's name) as `bundle` on the device.
  static func run(_ fixture: MountFixture, _ bundle: String, _ program: String, _ arguments: [String] = [])
    throws -> (status: Int32, lines: [String: String])
  {
    let result = try Command.run(
      Command.appbox,
      ["run", fixture.mountpoint, "--app", bundle, "--", RunCommandTests.example(program)] + arguments)
    return (result.status, RunCommandTests.lines(result.output))
  }

  @Test("the widget reads the shared timeline unlocked; locked, class A fails it and class C does not")
  func lockedWidget() throws {
    let fixture = try MountFixture(arguments: ["--device", "--grace", "0"])
    for bundle in [Self.app, Self.widget] {
      let installed = try Command.run(
        Command.appbox, ["app", "install", fixture.mountpoint, bundle, "--group", Self.group])
      try #require(installed.status == 0, "app install: \(installed.error)")
    }
    let shared = fixture.path(DeviceMountTests.group(Self.group) + "/timeline.json")
    // Class A: written and read while unlocked.
    let written = try Self.run(fixture, Self.app, "timeline-app", ["complete"])
    #expect(written.status == 0 && written.lines["wrote"] == shared, "\(written.lines)")
    let unlocked = try Self.run(fixture, Self.widget, "timeline-widget")
    #expect(unlocked.status == 0 && unlocked.lines["entries"] == "3", "\(unlocked.lines)")
    // Locked: the widget, as iOS runs it in the background, cannot read a class-A file.
    #expect(try Command.run(Command.appbox, ["lock", fixture.mountpoint]).status == 0)
    let locked = try Self.run(fixture, Self.widget, "timeline-widget")
    #expect(locked.status == 1 && locked.lines["protectedDataAvailable"] == "false", "\(locked.lines)")
    #expect(locked.lines["error"]?.isEmpty == false)
    // The fix: the app writes the timeline with class C; locked, the widget reads it.
    #expect(try Command.run(Command.appbox, ["unlock", fixture.mountpoint]).status == 0)
    let fixed = try Self.run(fixture, Self.app, "timeline-app", ["completeUntilFirstUserAuthentication"])
    #expect(fixed.status == 0, "\(fixed.lines)")
    #expect(try Command.run(Command.appbox, ["lock", fixture.mountpoint]).status == 0)
    let works = try Self.run(fixture, Self.widget, "timeline-widget")
    #expect(works.status == 0 && works.lines["entries"] == "3", "\(works.lines)")
    // Only a member of the group gets its container.
    let other = try Command.run(Command.appbox, ["app", "install", fixture.mountpoint, "com.example.other"])
    try #require(other.status == 0)
    let outsider = try Self.run(fixture, "com.example.other", "timeline-widget")
    #expect(outsider.status == 1 && outsider.lines["error"]?.contains("not a member") == true, "\(outsider.lines)")
  }
}
