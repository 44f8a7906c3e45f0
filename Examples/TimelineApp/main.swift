// An app that shares today's timeline with its widget through an App Group, as iOS apps
// do: it writes `timeline.json` in the group's container with the class it is given.
// With `complete` (class A, what many apps choose for everything) its widget, which iOS
// runs while the device is locked, cannot read the file then; the fix is class
// `completeUntilFirstUserAuthentication` (C), readable after the first unlock.
//
//   appbox run MOUNT --app com.example.timeline -- appbox-example-timeline-app [complete|completeUntilFirstUserAuthentication]
//
// Prints `wrote=PATH` and `class=NAME`, or `error=…` and exits 1.
import AppBoxKit

let group = "group.com.example.timeline"
let name = CommandLine.arguments.dropFirst().first ?? "complete"
let option: Data.WritingOptions
switch name {
case "complete": option = .completeFileProtection
case "completeUnlessOpen": option = .completeFileProtectionUnlessOpen
case "completeUntilFirstUserAuthentication": option = .completeFileProtectionUntilFirstUserAuthentication
default:
  FileHandle.standardError.write(
    Data("usage: appbox-example-timeline-app [complete|completeUnlessOpen|completeUntilFirstUserAuthentication]\n".utf8)
  )
  exit(64)
}
guard let shared = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: group) else {
  print("error=not a member of \(group)")
  exit(1)
}
let timeline = shared.appendingPathComponent("timeline.json")
let entries = ["09:00 stand-up", "12:30 lunch", "16:00 review"]
do {
  try JSONEncoder().encode(entries).write(to: timeline, options: [.atomic, option])
  print("wrote=\(timeline.path)")
  print("class=\(name)")
} catch {
  print("error=\(error.localizedDescription)")
  exit(1)
}
