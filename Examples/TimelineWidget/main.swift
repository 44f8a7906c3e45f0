// The widget of appbox-example-timeline-app: reads the timeline its app shares through the
// App Group, as a widget extension does when iOS asks it for a snapshot, often while the
// device is locked. A class-A file cannot be read then: the widget says so and shows
// nothing, the failure a developer meets only on a device.
//
//   appbox run MOUNT --app com.example.timeline.widget -- appbox-example-timeline-widget
//
// Prints `entries=N` and each entry, or `error=…` and exits 1.
import AppBoxKit

let group = "group.com.example.timeline"
guard let shared = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: group) else {
  print("error=not a member of \(group)")
  exit(1)
}
print("protectedDataAvailable=\(UIApplication.shared.isProtectedDataAvailable)")
do {
  let data = try Data(contentsOf: shared.appendingPathComponent("timeline.json"))
  let entries = try JSONDecoder().decode([String].self, from: data)
  print("entries=\(entries.count)")
  for entry in entries { print("entry=\(entry)") }
} catch {
  print("error=\(error.localizedDescription)")
  exit(1)
}
