import AppBoxFS
import Posix
import SandboxPolicy

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Apps on a device mount
//
// `app-install BUNDLE-ID [GROUP-ID…]`, `app-remove BUNDLE-ID` (both refused to a run's
// program without --allow-device-control, as device control is), `app-list`, and
// `app-run BUNDLE-ID` (a run of `appbox run --app` registering, which keeps its app from
// being removed). Each id is checked again here: the request line is the client's.

extension ControlServer {
  /// Answers an `app-…` request from `peer`, the process bound to the connection at its
  /// accept.
  func handleApp(_ verb: String, _ words: [String], peer: DeviceControlGate.Peer) -> String {
    guard filesystem.deviceApps != nil else {
      return Self.error("\(mountpoint) is not a device mount (mount with --device)", code: .noInput)
    }
    var ids: [ContainerIdentifier] = []
    for word in words {
      do throws(ContainerIdentifier.Problem) { ids.append(try ContainerIdentifier(validating: word)) } catch {
        return Self.error("\(word.prefix(300)): \(error)", code: .badValue)
      }
    }
    switch (verb, ids.count) {
    case ("app-list", 0):
      return "{\"ok\":true,\"status\":\(filesystem.statusJSON())}"
    case ("app-install", 1...):
      do throws(AppChangeError) {
        let created = try filesystem.installApp(ids[0], groups: Array(ids.dropFirst()))
        return "{\"ok\":true,\"created\":[" + created.map { JSONText.quoted($0.name) }.joined(separator: ",") + "]}"
      } catch {
        return Self.appError(error)
      }
    case ("app-remove", 1):
      return appChanges.withLock { _ in remove(ids[0]) }
    case ("app-run", 1):
      return appChanges.withLock { _ in
        guard filesystem.deviceApps?.isInstalled(ids[0]) == true else {
          return Self.error("no app \(ids[0]) is installed", code: .noInput)
        }
        // The process that connected, as read at the accept: not whatever has its pid now.
        guard let process = peer.process else {
          return Self.error(
            "cannot register the run of process \(peer.pid): it cannot be shown to be the process that connected",
            code: .osError)
        }
        guard let runGroups, let access = filesystem.access(for: ids[0]) else {
          return Self.error("this mount's daemon confines no app runs", code: .unavailable)
        }
        appRuns.register(ids[0], process: process)
        do throws(CLIError) {
          return "{\"ok\":true,\"cgroup\":\(JSONText.quoted(try runGroups.newRun(access, keeper: process)))}"
        } catch {
          return Self.error(error.message, code: error.code)
        }
      }
    default:
      return Self.error("bad app request: \(verb) \(words.joined(separator: " ").prefix(200))")
    }
  }

  /// Removes `app` unless a program runs as it (under ``appChanges``).
  private func remove(_ app: ContainerIdentifier) -> String {
    let running: pid_t?
    do throws(Errno) { running = try appRuns.running(app) } catch {
      return Self.error("cannot tell whether a program runs as \(app) (/proc: \(error))", code: .osError)
    }
    if let running {
      return Self.error(
        "a program runs as \(app) (appbox run, process \(running)): remove the app once it has ended", code: .busy)
    }
    do throws(AppChangeError) {
      let removed = try filesystem.removeApp(app)
      return "{\"ok\":true,\"groups\":[" + removed.groups.map { JSONText.quoted($0.name) }.joined(separator: ",")
        + "],\"files\":\(removed.files),\"bytes\":\(removed.bytes)}"
    } catch {
      return Self.appError(error)
    }
  }

  /// The reply to a change of apps that changed nothing, with the exit code it means.
  static func appError(_ error: AppChangeError) -> String {
    switch error {
    case .notADevice: Self.error(error.description, code: .noInput)
    case .refused(.notInstalled): Self.error(error.description, code: .noInput)
    case .refused: Self.error(error.description, code: .badValue)
    case .noSpace: Self.error(error.description, code: .failure)
    case .system: Self.error(error.description, code: .osError)
    }
  }
}
